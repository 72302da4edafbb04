"""Telling a database outage from an ordinary error, and logging it once.

During an outage every statement fails; logging each one (every claim, every item, every
step, every beat) would bury the one line an operator needs. The worker reports failures
and successes here; one line is logged when the database stops answering and one when it
answers again, with how long it was gone.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import threading
import time

from django.db import DatabaseError, InterfaceError, OperationalError, connection

log = logging.getLogger("issuance.worker")

# A success this soon after a failure does not end an outage: while a server goes down,
# a statement on a backend that has not died yet may still succeed.
SETTLE = 1.0


class Failure(enum.Enum):
    DOWN = "down"  # the server does not answer
    LOST = "lost"  # this connection died (in an outage that is over, or killed alone)


class DatabaseOutage:
    """Whether the database is answering, as seen by one worker's threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None  # monotonic start of the current outage
        self._last_failure = 0.0
        self._back: float | None = None  # the first success since the last failure
        self.outages = 0

    @property
    def active(self) -> bool:
        return self._since is not None

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self._last_failure = time.monotonic()
            self._back = None
            if self._since is not None:
                return
            self._since = self._last_failure
            self.outages += 1
        log.warning("database unavailable (%s); waiting for it", _first_line(exc))

    def noted(self, exc: BaseException) -> bool:
        """True when `exc` is the database being unreachable (now: the outage is noted, or a
        moment ago: a connection that died in it); False for an ordinary error."""
        failure = classify(exc)
        if failure is Failure.DOWN:
            self.failed(exc)
        elif failure is Failure.LOST:
            log.debug("a database connection was lost (%s); reconnected", _first_line(exc))
        return failure is not None

    def ok(self) -> None:
        """A statement succeeded. The outage ends at the first success that stays one:
        the line is logged once SETTLE has passed since the last failure, which an idle
        worker sees only at its next poll, but the length it gives ends at that success."""
        if self._since is None:  # the common case: no lock, no work
            return
        with self._lock:
            since = self._since
            if since is None:
                return
            now = time.monotonic()
            if self._back is None:
                self._back = now
            if now - self._last_failure < SETTLE:
                return
            back, self._since, self._back = self._back, None, None
        log.info("database available again after %.1f s", back - since)


def classify(exc: BaseException) -> Failure | None:
    """DOWN or LOST when `exc` means the database cannot be reached; None for a statement
    that failed on a working connection (an ordinary error).

    Connection-level failures surface as OperationalError or InterfaceError, but so do a
    few statement-level ones (a deadlock, a lock timeout). So the connection is looked at,
    and the server asked for `SELECT 1` on a new one.
    """
    if not isinstance(exc, OperationalError | InterfaceError):
        return None
    if connection.in_atomic_block:
        return None  # a caller's transaction (tests): not ours to close
    raw = connection.connection
    lost = raw is None or bool(getattr(raw, "closed", False) or getattr(raw, "broken", False))
    with contextlib.suppress(DatabaseError):
        connection.close()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError:
        with contextlib.suppress(DatabaseError):
            connection.close()
        return Failure.DOWN
    return Failure.LOST if lost else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
