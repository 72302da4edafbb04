"""Asking the worker to look at an object soon (after commit), from anywhere.

Other processes are woken with PostgreSQL NOTIFY. Every NOTIFY wakes every listening
worker, which then looks for work; during bulk issuance there were ~8 per certificate. So
a process sends at most one NOTIFY per NOTIFY_GAP: the first of a burst at once (a lone
wake-up is never delayed), the rest folded into one sent at the end of the gap (nothing is
lost: a worker that wakes claims everything due by then).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import (
    DEFAULT_DB_ALIAS,
    DatabaseError,
    OperationalError,
    connection,
    connections,
    transaction,
)
from django.db.models import F, Model
from django.utils import timezone

log = logging.getLogger("issuance.worker.wakeup")

# Set when something became due in this process; the in-process worker waits on it.
local_wakeup = threading.Event()
NOTIFY_CHANNEL = "issuance_wakeup"
NOTIFY_GAP = 0.05
# The notifier thread closes its connection after this many idle seconds.
NOTIFIER_IDLE = 1.0

_lock = threading.Lock()
_wakeup_notifier = threading.Condition(_lock)
_last_sent = -1.0
# When the folded NOTIFY of a burst is due (monotonic), None when none is pending.
_trailing: float | None = None
_notifier: threading.Thread | None = None
_failing = False  # the last folded NOTIFY failed


def notify_workers() -> None:
    """Wake sleeping workers: this process's at once, other processes' via PostgreSQL NOTIFY."""
    global _last_sent, _trailing, _notifier  # noqa: PLW0603 - one debounce state per process
    local_wakeup.set()
    if connection.vendor != "postgresql":
        return
    now = time.monotonic()
    with _lock:
        if now - _last_sent >= NOTIFY_GAP and _trailing is None:
            _last_sent = now
        else:
            if _trailing is None:
                _trailing = _last_sent + NOTIFY_GAP
                if _notifier is None or not _notifier.is_alive():
                    _notifier = threading.Thread(
                        target=_send_trailing, name="notify-workers", daemon=True
                    )
                    _notifier.start()
                _wakeup_notifier.notify()
            return
    _send()


def _send() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")


def _send_trailing() -> None:
    """The folded NOTIFYs, from one long-lived thread on its own connection (a timer thread
    per burst opened and closed a database connection every time: a server process each)."""
    global _last_sent, _trailing, _failing  # noqa: PLW0603
    while True:
        with _lock:
            while _trailing is None:
                if not _wakeup_notifier.wait(NOTIFIER_IDLE):
                    # Idle: give the connection back (a held one keeps a server process,
                    # and stops a test database from being dropped).
                    connections[DEFAULT_DB_ALIAS].close()
            delay = _trailing - time.monotonic()
            if delay > 0:
                _wakeup_notifier.wait(delay)
                continue
            _trailing = None
            _last_sent = time.monotonic()
        try:
            _send()
        except Exception as exc:  # no caller to raise to; workers still find the rows later
            if not _failing:  # once per failure streak
                # A lost database is logged where it is noticed (worker, web), once.
                level = logging.DEBUG if isinstance(exc, OperationalError) else logging.WARNING
                log.log(level, "could not NOTIFY the workers: %s", str(exc).splitlines()[0:1])
            _failing = True
            with contextlib.suppress(DatabaseError):
                connections[DEFAULT_DB_ALIAS].close()  # reconnect for the next one
        else:
            _failing = False


def wake(obj: Model, at: datetime | None = None) -> None:
    """Make `obj` due at `at` (default now), even if a worker holds it right now (wake_seq
    tells the worker's release that someone asked for a look meanwhile)."""
    rows = type(obj)._default_manager.filter(pk=obj.pk)
    rows.update(due_at=at or timezone.now(), wake_seq=F("wake_seq") + 1)
    woken(at)


def wake_sql(obj: Model, at: datetime | None = None) -> tuple[str, list[Any]]:
    """The UPDATE that wakes `obj`, for issuance.fastpaths.model_save, which runs it in the same
    statement as a compare-and-set write (its caller calls woken() after it). Plain SQL
    because it is part of that one statement; wake() itself is a QuerySet.update (the
    raw text there saved nothing measurable: docs/decisions/0004-bypasses.md)."""
    when = at or timezone.now()
    quote = connection.ops.quote_name
    table = quote(obj._meta.db_table)
    pk = quote(obj._meta.pk.column)
    sql = f"UPDATE {table} SET due_at = %s, wake_seq = wake_seq + 1 WHERE {pk} = %s"  # noqa: S608
    return sql, [connection.ops.adapt_datetimefield_value(when), obj.pk]


@dataclass(frozen=True)
class Wake:
    """A wake-up of `obj` made together with a compare-and-set write of another row
    (issuance.fastpaths.model_save.save_where(..., wake=Wake(owner)))."""

    obj: Model

    def sql(self) -> tuple[str, list[Any]]:
        return wake_sql(self.obj)

    def run(self) -> None:
        wake(self.obj)

    def done(self) -> None:
        woken()


# NOTIFY payload asking workers to run their steps now (not only look for due rows): sent
# for rare, user-made requests that a step carries out (a cluster write-back).
STEPS_PAYLOAD = "steps"
# Set in this process for the same request; the in-process worker reads and clears it.
steps_requested = threading.Event()


def request_steps() -> None:
    """After commit: every worker runs its steps at its next wake-up, in this process and in
    others. Not debounced: it is sent per user action, never per row."""

    def send() -> None:
        steps_requested.set()
        local_wakeup.set()
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, STEPS_PAYLOAD])

    transaction.on_commit(send)


def woken(at: datetime | None = None) -> None:
    """After a wake-up was stored: tell the workers (after commit) when it is due now."""
    if at is None or at <= timezone.now():
        transaction.on_commit(notify_workers)
