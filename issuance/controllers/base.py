"""The controller contract: the Result a reconcile returns and the errors it may raise.

A controller is `reconcile(obj) -> Result`, run by the worker on a row it has leased
(issuance/controllers/registry.py lists them; docs/architecture.md, "The controller
contract", says more). A pass:

- reads the row as it is now (level-triggered: whatever woke it, the state decides);
- goes as far as it can: it does every step whose inputs it has, one after another, and
  stops only to wait (for the CA, a person, another object, a time);
- stores its progress on the row after every side effect, before the next one (the key
  before the request made with it, "attempted" before an ACME call, its answer right
  after), so a worker killed at any line resumes from what is stored;
- makes each side effect idempotent or guarded: inserts rely on unique constraints, writes
  that must not overwrite someone else's progress are compare-and-set, calls to the
  outside may be repeated;
- returns when to look again: `Result.now()` (more to do at once: the worker continues
  inline, on the same object under the same lease), `Result.after(delay)`, or
  `Result.done()` (nothing until woken). It never sleeps;
- raises TemporaryError when a step cannot be done now (with `delay`, or the worker's
  per-item backoff) and PermanentError when retrying cannot help (recorded; left alone
  until woken);
- wakes other objects with `wake(obj)` (or finishes their work in hand when that is all
  their own pass would do), and publishes nothing: live updates follow from the saves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class Result:
    """When to look again: zero (at once, inline), a delay, or None (not until woken)."""

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
    """Try again later. With `delay` the controller chose the wait; else the worker backs off
    per item (ACME controllers 5 s doubling to 30 min, others 1 s to 30 s)."""

    def __init__(self, message: str, delay: timedelta | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class PermanentError(Exception):
    """Retrying will not help: the worker records it (last_error and a Warning event) and
    stops looking until the object is woken."""
