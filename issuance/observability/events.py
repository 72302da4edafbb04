"""Recording Events (the timeline) and telling the live layer about them.

Inside `batched()` (the worker wraps each reconcile pass in it) entries are written together
when the block ends, in one INSERT, instead of one INSERT each: an issuance records ~18
entries over ~16 passes, and those single-row INSERTs were the most frequent statement of
bulk issuance. An entry recorded inside a transaction joins the batch only if that
transaction commits (a rolled-back step leaves no trace). The cost: a worker killed in the
few milliseconds between a step's commit and the end of its pass loses that pass's
timeline entries; the state they describe is stored either way. Outside `batched()` (web
requests, commands, tests calling controllers) every entry is written at once.
On PostgreSQL the batch is one hand-built multi-row INSERT (issuance/fastpaths/event_insert.py
says why and what it saves).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from issuance.fastpaths.event_insert import insert_sql, stored
from issuance.models import (
    Certificate,
    CertificateRequest,
    Challenge,
    Event,
    Order,
    certificate_name_of,
)
from issuance.observability import publish

log = logging.getLogger("issuance.observability.events")

_local = threading.local()


def record(
    kind: str,
    name: str,
    reason: str,
    message: str = "",
    *,
    type_: str = Event.NORMAL,
    actor: str = "",
    certificate_name: str = "",
) -> Event:
    event = entry(
        kind, name, reason, message, type_=type_, actor=actor, certificate_name=certificate_name
    )
    log.info("%s/%s %s: %s%s", kind, name, reason, message, f" (by {actor})" if actor else "")
    batch: list[Event] | None = getattr(_local, "batch", None)
    if batch is None:
        event.save()
        publish.event_recorded(event)
    elif connection.in_atomic_block:
        transaction.on_commit(lambda: batch.append(event))
    else:
        batch.append(event)
    return event


def record_if_missing(
    kind: str, name: str, reason: str, message: str = "", *, certificate_name: str = ""
) -> None:
    """record(), unless the timeline has this (kind, name, reason) already. For the retry of
    a create that an outage interrupted: the row may have been committed while the answer
    was lost (the connection ended between the commit and its reply), and the pass that made
    it then never recorded it; its retry finds the row (IntegrityError) and records it here."""
    if not Event.objects.filter(kind=kind, name=name, reason=reason).exists():
        record(kind, name, reason, message, certificate_name=certificate_name)


def entry(
    kind: str,
    name: str,
    reason: str,
    message: str = "",
    *,
    type_: str = Event.NORMAL,
    actor: str = "",
    certificate_name: str = "",
) -> Event:
    """An unsaved timeline entry: record() saves one; callers acting on many rows in one
    transaction build a list and store it with write() (one statement)."""
    return Event(
        kind=kind,
        name=name,
        reason=reason,
        message=message[:4000],
        type=type_,
        actor=actor,
        certificate_name=certificate_name,
        created_at=timezone.now(),
    )


def record_on(
    obj: Certificate | CertificateRequest | Order | Challenge,
    reason: str,
    message: str = "",
    type_: str = Event.NORMAL,
) -> Event:
    """An entry about a resource, on its owning certificate's timeline."""
    return record(
        obj.KIND,
        obj.name,
        reason,
        message,
        type_=type_,
        certificate_name=certificate_name_of(obj),
    )


@contextmanager
def collected() -> Iterator[list[Event] | None]:
    """Collect the entries recorded in this block (this thread); the caller writes them
    (write(), or the worker's release, in the same statement). Yields None when entries
    are written at once instead: nested in another block, or already inside a transaction
    (a test's, or a caller's that may roll back), where an entry could not wait for its
    own commit."""
    if getattr(_local, "batch", None) is not None or connection.in_atomic_block:
        yield None
        return
    batch: list[Event] = []
    _local.batch = batch
    try:
        yield batch
    finally:
        _local.batch = None


@contextmanager
def batched() -> Iterator[None]:
    """Write the entries recorded in this block (this thread) together when it ends."""
    with collected() as batch:
        try:
            yield
        finally:
            if batch:
                write(batch)


def write(
    batch: list[Event], on_error: Callable[[list[Event], DatabaseError], None] | None = None
) -> None:
    """Store the entries (one statement) and publish them. A database error is logged, or
    handed to `on_error` (the worker keeps entries it could not store in an outage)."""
    try:
        if connection.vendor == "postgresql":
            sql, params = insert_sql(batch)
            with connection.cursor() as cursor:
                cursor.execute(sql, params)
                stored([r[0] for r in cursor.fetchall()], batch)
        elif len(batch) == 1:
            batch[0].save()  # one INSERT; bulk_create would wrap it in BEGIN … COMMIT
        else:
            Event.objects.bulk_create(batch)
    except DatabaseError as exc:
        if on_error is not None:
            on_error(batch, exc)
        else:
            log.exception("could not record %d timeline entries", len(batch))
        return
    published(batch)


def published(batch: list[Event]) -> None:
    for event in batch:
        publish.event_recorded(event)
