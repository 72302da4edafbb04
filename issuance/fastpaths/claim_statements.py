"""The worker's claim over every controller's table in one PostgreSQL statement, and its
release of a row in one statement that also writes the pass's timeline entries.

The portable claim (issuance/worker/claim.py, per table, compare-and-set) costs a round
trip per table even for tables with nothing due; with five tables that was ~15 round trips
every time a thread became free. Here one statement locks up to `limit` due, unleased rows
per table (SKIP LOCKED: rows another worker is claiming are passed over), keeps `limit` of
them taking turns between the tables (oldest first within each), leases them and returns
them. Rows locked but not kept are unlocked, unleased, when the statement ends.

Measured (docs/decisions/0004-bypasses.md): the claim over every table in one statement
saves the worker 9.8 ms per certificate (38 %), and the release statement that also writes
the timeline entries saves 5.7 ms (22 %). Both become unnecessary if the claim moves to one
queue table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import Model

from issuance.fastpaths.event_insert import insert_sql, stored
from issuance.models import Event
from issuance.observability import events

# Table and column names come from the models (quoted); every value is a parameter.
_LOCKED = (
    "c{i} AS MATERIALIZED (SELECT {pk} AS id, due_at FROM {table}"
    " WHERE due_at <= %(now)s AND (lease_until IS NULL OR lease_until < %(now)s)"
    " ORDER BY due_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED)"
)
_PICKED = "SELECT {i} AS k, id, due_at FROM c{i}"
_UPDATED = (
    "u{i} AS (UPDATE {table} SET lease_owner = %(owner)s, lease_until = %(until)s"
    " WHERE {pk} IN (SELECT id FROM pick WHERE k = {i})"
    " RETURNING {i} AS k, {pk} AS id, wake_seq, error_count, due_at)"
)
_RETURNED = "SELECT k, id, wake_seq, error_count, due_at FROM u{i}"
# Taken round-robin over the tables (each one's oldest first, then each one's second, …), so
# a long backlog of one kind (a renewal storm of Certificates) cannot hold back the others
# (the Challenges and Orders that finish the issuances already started).
_STATEMENT = (
    "WITH {locked}, pick AS MATERIALIZED (SELECT k, id, due_at FROM ("
    "SELECT k, id, due_at, row_number() OVER (PARTITION BY k ORDER BY due_at) AS turn"
    " FROM ({picked}) AS due) AS ranked ORDER BY turn, due_at LIMIT %(limit)s), {updated}"
    " SELECT k, id, wake_seq, error_count FROM ({returned}) AS claimed ORDER BY due_at"
)


def claim_sql(models: Sequence[type[Model]]) -> str:
    """The statement for these tables (the same text for the same models)."""
    quote = connection.ops.quote_name
    parts: dict[str, list[str]] = {"locked": [], "picked": [], "updated": [], "returned": []}
    for i, model in enumerate(models):
        names = {
            "i": str(i),
            "table": quote(model._meta.db_table),
            "pk": quote(model._meta.pk.column),
        }
        parts["locked"].append(_LOCKED.format(**names))
        parts["picked"].append(_PICKED.format(**names))
        parts["updated"].append(_UPDATED.format(**names))
        parts["returned"].append(_RETURNED.format(**names))
    return _STATEMENT.format(
        locked=", ".join(parts["locked"]),
        picked=" UNION ALL ".join(parts["picked"]),
        updated=", ".join(parts["updated"]),
        returned=" UNION ALL ".join(parts["returned"]),
    )


def claim_all(
    models: Sequence[type[Model]], limit: int, owner: str, now: datetime, until: datetime
) -> list[tuple[int, Any, int, int]]:
    """Lease up to `limit` due rows over all `models`, oldest due first.

    Returns (index into models, pk, wake_seq, error_count) per claimed row.
    """
    if not models or limit <= 0:
        return []
    params: dict[str, datetime | int | str] = {
        "now": now,
        "limit": limit,
        "owner": owner,
        "until": until,
    }
    with connection.cursor() as cursor:
        cursor.execute(claim_sql(models), params)
        return [(int(k), pk, int(seq), int(errors)) for k, pk, seq, errors in cursor.fetchall()]


# Giving a row back: the next due time, unless it was woken while leased (wake_seq moved):
# then the earlier of the wake-up and the next due time (or the wake-up alone when the
# reconcile said "nothing to do"). Plain SQL (any vendor): the ORM compiled the CASE
# expression anew for every item, which cost more CPU than the statement itself.
_RELEASE_DONE = (
    "UPDATE {table} SET due_at = CASE WHEN wake_seq = %s THEN NULL ELSE due_at END,"
    " lease_owner = '', lease_until = NULL, error_count = %s, last_error = %s"
    " WHERE {pk} = %s AND lease_owner = %s"
)
_RELEASE_AT = (
    "UPDATE {table} SET due_at = CASE WHEN wake_seq = %s THEN %s"
    " WHEN due_at IS NOT NULL AND due_at < %s THEN due_at ELSE %s END,"
    " lease_owner = '', lease_until = NULL, error_count = %s, last_error = %s"
    " WHERE {pk} = %s AND lease_owner = %s"
)


def release(
    model: type[Model],
    pk: Any,
    owner: str,
    wake_seq: int,
    at: datetime | None,
    errors: int,
    error: str,
    entries: Sequence[Event] = (),
    on_entries_error: Callable[[list[Event], DatabaseError], None] | None = None,
) -> int:
    """Release `owner`'s lease on one row; due at `at` (None: not due). Returns rows changed.

    `entries`: timeline entries of the pass that ends here; on PostgreSQL they are inserted
    by the same statement (a data-modifying WITH), one round trip instead of two. Entries the
    database refuses go to `on_entries_error` (default: logged).
    """
    names = {
        "table": connection.ops.quote_name(model._meta.db_table),
        "pk": connection.ops.quote_name(model._meta.pk.column),
    }
    params: list[Any]
    if at is None:
        sql = _RELEASE_DONE.format(**names)
        params = [wake_seq, errors, error, pk, owner]
    else:
        value = connection.ops.adapt_datetimefield_value(at)
        sql = _RELEASE_AT.format(**names)
        params = [wake_seq, value, value, value, errors, error, pk, owner]
    batch = list(entries)
    if batch and connection.vendor == "postgresql":
        insert, values = insert_sql(batch)
        combined = (
            f"WITH e AS ({insert}), r AS ({sql} RETURNING 1)"  # noqa: S608 - built texts
            " SELECT (SELECT count(*) FROM r), e.* FROM e"
        )
        try:
            with connection.cursor() as cursor:
                cursor.execute(combined, [*values, *params])
                rows = cursor.fetchall()
        except DatabaseError:
            # An entry the table refuses must not keep the row leased: apart, as before
            # (write() logs what it cannot store), then the release alone.
            events.write(batch, on_entries_error)
        else:
            stored([row[1] for row in rows], batch)
            events.published(batch)
            return int(rows[0][0]) if rows else 0
    elif batch:
        events.write(batch, on_entries_error)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)
