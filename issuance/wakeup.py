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
from datetime import datetime

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connection, connections, transaction
from django.db.models import Model
from django.utils import timezone

log = logging.getLogger("issuance.wakeup")

# Set when something became due in this process; the in-process worker waits on it.
local_wakeup = threading.Event()
NOTIFY_CHANNEL = "issuance_wakeup"
NOTIFY_GAP = 0.05

_lock = threading.Lock()
_last_sent = -1.0
_trailing: threading.Timer | None = None


def notify_workers() -> None:
    """Wake sleeping workers: this process's at once, other processes' via PostgreSQL NOTIFY."""
    global _last_sent, _trailing  # noqa: PLW0603 - one debounce state per process
    local_wakeup.set()
    if connection.vendor != "postgresql":
        return
    now = time.monotonic()
    with _lock:
        if now - _last_sent >= NOTIFY_GAP:
            _last_sent = now
        else:
            if _trailing is None:
                _trailing = threading.Timer(NOTIFY_GAP - (now - _last_sent), _send_trailing)
                _trailing.daemon = True
                _trailing.start()
            return
    _send()


def _send() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")


def _send_trailing() -> None:
    global _last_sent, _trailing  # noqa: PLW0603
    with _lock:
        _trailing = None
        _last_sent = time.monotonic()
    try:
        _send()
    except Exception:  # a timer thread has no caller to raise to
        # Workers still find the rows: at their next due time or idle cap.
        log.warning("could not NOTIFY the workers", exc_info=True)
    finally:
        with contextlib.suppress(DatabaseError):
            connections[DEFAULT_DB_ALIAS].close()  # this timer thread's own connection


def wake(obj: Model, at: datetime | None = None) -> None:
    """Make `obj` due at `at` (default now), even if a worker holds it right now."""
    when = at or timezone.now()
    # Plain SQL: several wake-ups per certificate, and the ORM compiled this UPDATE anew for
    # each one (names from the model, quoted; values are parameters).
    quote = connection.ops.quote_name
    table = quote(obj._meta.db_table)
    pk = quote(obj._meta.pk.column)  # type: ignore[union-attr]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET due_at = %s, wake_seq = wake_seq + 1 WHERE {pk} = %s",  # noqa: S608
            [connection.ops.adapt_datetimefield_value(when), obj.pk],
        )
    if when <= timezone.now():
        transaction.on_commit(notify_workers)
