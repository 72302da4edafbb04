"""Crash injection for tests: a simulated process death at a named point between steps.

Controllers call `checkpoint(name)` right after a step's effect is committed. When the
module variable `CRASH_AT` (tests) or the environment variable `ISSUANCE_CRASH_AT`
(subprocess tests) names that point, the process "dies" there:

- `SimulatedCrash` (a BaseException, so no `except Exception` in the worker swallows it)
  propagates out of the worker and leaves the lease on the row, like a dead process;
- with `ISSUANCE_CRASH_MODE=kill` the process sends itself SIGKILL: a real death.

Both are no-ops (one attribute read and one dict lookup) in production.
"""

from __future__ import annotations

import os
import signal

from issuance import environment

CRASH_AT: str | None = None

# Every checkpoint the controllers pass, in issuance order (tests iterate over these).
CHECKPOINTS = (
    "after-issuing-set",
    "after-key-stored",
    "after-request-created",
    "after-approved",
    "after-signed",
    "after-secret-written",
    "after-failure-recorded",
)


class SimulatedCrash(BaseException):
    """The process died here (test only)."""


def checkpoint(name: str) -> None:
    target = CRASH_AT or environment.ISSUANCE_CRASH_AT.value()
    if not target or target != name:
        return
    if environment.ISSUANCE_CRASH_MODE.value() == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    raise SimulatedCrash(name)
