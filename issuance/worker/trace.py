"""A record of reconcile passes, for tests and benchmarks: with ISSUANCE_RECONCILE_TRACE
set to a file, every pass appends "<pid> <controller> <pk> <start ns> <end ns>"; tests
read it to prove no two workers reconciled one row at the same time. Unset (production),
a span costs one truth test."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from issuance import environment

PATH = environment.ISSUANCE_RECONCILE_TRACE.value()


@contextmanager
def span(controller: str, pk: Any) -> Iterator[None]:
    """One pass; it ends before the row's lease is released."""
    if not PATH:
        yield
        return
    started = time.time_ns()
    try:
        yield
    finally:
        _append(f"{os.getpid()} {controller} {pk} {started} {time.time_ns()}\n")


def _append(line: str) -> None:
    fd = os.open(PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)
