"""What every controller shares: the Result it returns and the errors it may raise.

A controller is `reconcile(obj) -> Result`: read state, do at most one side effect, write
status, say when to look again. It never sleeps; to wait it returns `requeue_after` or
raises TemporaryError(delay).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class Result:
    """`requeue_after=None`: nothing to do until something wakes the object."""

    requeue_after: timedelta | None = None

    @classmethod
    def now(cls) -> Result:
        return cls(timedelta(0))

    @classmethod
    def after(cls, delay: timedelta) -> Result:
        return cls(max(delay, timedelta(0)))

    @classmethod
    def done(cls) -> Result:
        return cls(None)


class TemporaryError(Exception):
    """Try again later. With `delay` the controller chose the wait; else the worker backs off."""

    def __init__(self, message: str, delay: timedelta | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """Retrying will not help; the worker records it and stops looking until woken."""
