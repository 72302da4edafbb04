"""Asking the worker to look at an object soon (after commit), from anywhere."""

from __future__ import annotations

import threading
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F, Model
from django.utils import timezone

# Set when something became due in this process; the in-process worker waits on it.
local_wakeup = threading.Event()
NOTIFY_CHANNEL = "issuance_wakeup"


def notify_workers() -> None:
    """Wake sleeping workers: this process's at once, other processes' via PostgreSQL NOTIFY."""
    local_wakeup.set()
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"NOTIFY {NOTIFY_CHANNEL}")


def wake(obj: Model, at: datetime | None = None) -> None:
    """Make `obj` due at `at` (default now), even if a worker holds it right now."""
    when = at or timezone.now()
    type(obj)._default_manager.filter(pk=obj.pk).update(  # type: ignore[attr-defined]
        due_at=when, wake_seq=F("wake_seq") + 1
    )
    if when <= timezone.now():
        transaction.on_commit(notify_workers)
