"""Helpers every test package shares: run the worker until nothing is due, wait for a condition.

Plain functions (no pytest imports), so bench/ scripts can use them too. Builders of rows
live in tests/factories.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def drain() -> int:
    """Run a one-thread worker until nothing is due (what that work makes due included), on
    the caller's connection; returns how many reconciles ran."""
    from issuance.worker.loop import Worker

    return Worker(threads=1).run_once()


def wait_for(
    check: Callable[[], T | None], timeout: float = 30.0, what: str = "", poll: float = 0.1
) -> T:
    """Call `check` until it returns something true, and return that; AssertionError naming
    `what` when `timeout` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout}s: {what or check}")
        time.sleep(poll)
