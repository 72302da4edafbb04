"""Claiming due rows with a lease, and giving them back: the one claim path of `run()`,
`tick()` and `run_once()`.

A row is claimable when it is due (`due_at <= now`) and not leased (no `lease_until`, or one
in the past). Claiming sets `lease_owner` and `lease_until = now + WORKER_LEASE`; the
heartbeat renews the lease while the row is worked on, so a dead worker's rows are taken
over once their lease runs out (docs/decisions/0002-leases-and-heartbeats.md).

On PostgreSQL every table is claimed in one statement and a row is released in one
statement with its pass's timeline entries (issuance/fastpaths/claim_statements.py says
why and what it saves). Elsewhere (SQLite) each table is claimed in turn, row by row, with a
compare-and-set UPDATE: only one worker's UPDATE matches an unleased row.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Min, Model, Q
from django.utils import timezone

from issuance.fastpaths.claim_statements import claim_all, release

__all__ = ["ClaimedRow", "claim", "next_claimable", "release"]

# (index into the models claimed over, pk, wake_seq, error_count)
ClaimedRow = tuple[int, Any, int, int]


def claim(
    models: Sequence[type[Model]],
    limit: int,
    owner: str,
    now: datetime,
    until: datetime,
    *,
    start: int = 0,
    stop: threading.Event | None = None,
) -> list[ClaimedRow]:
    """Lease up to `limit` due rows over `models` for `owner` until `until`.

    `start`: the table to begin with where tables are claimed in turn (the caller moves it
    on each time, so that no table starves the others); `stop`: no further table once set.
    """
    if not models or limit <= 0:
        return []
    if connection.vendor == "postgresql":
        return claim_all(models, limit, owner, now, until)
    found: list[ClaimedRow] = []
    order = [*range(start, len(models)), *range(start)]
    for index in order:
        if len(found) >= limit or (stop is not None and stop.is_set()):
            break
        rows = _claim_table(models[index], limit - len(found), owner, now, until)
        found += [(index, pk, seq, errors) for pk, seq, errors in rows]
    return found


def _unleased(now: datetime) -> Q:
    return Q(lease_until__isnull=True) | Q(lease_until__lt=now)


def _claim_table(
    model: type[Model], limit: int, owner: str, now: datetime, until: datetime
) -> list[tuple[Any, int, int]]:
    manager = model._default_manager
    due = manager.filter(due_at__lte=now).filter(_unleased(now)).order_by("due_at")
    won = []
    for pk, seq, errors in due.values_list("pk", "wake_seq", "error_count")[:limit]:
        taken = (
            manager.filter(pk=pk, due_at__lte=now)
            .filter(_unleased(now))
            .update(lease_owner=owner, lease_until=until)
        )
        if taken:
            won.append((pk, int(seq), int(errors)))
    return won


def next_claimable(models: Sequence[type[Model]]) -> datetime | None:
    """The earliest moment a row of `models` becomes claimable (due and not leased)."""
    now = timezone.now()
    moments: list[datetime] = []
    for model in models:
        rows = model._default_manager.filter(due_at__isnull=False)
        free = rows.filter(_unleased(now)).aggregate(m=Min("due_at"))["m"]
        leased = rows.filter(lease_until__gte=now).aggregate(m=Min("lease_until"))["m"]
        moments += [m for m in (free, leased) if m is not None]
    return min(moments) if moments else None
