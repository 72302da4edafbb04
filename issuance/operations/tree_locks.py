"""Locking certificates and everything below them for a delete, beside a running worker.

The worker's transactions go up the tree: it updates a challenge and wakes its order, finishes
an order and hands the chain to its request, finishes a request and wakes its certificate
(one transaction each). A delete that locked a certificate first and then waited for one of its
children would close a cycle with such a transaction, and PostgreSQL would kill one of the two
(seen: four deadlocks in eight rounds of deleting certificates mid-issuance). So a delete takes
its locks bottom-up (challenges, orders, requests and the rows that point at certificates, then
the certificates) and never waits for one: every lock is taken with NOWAIT, and any conflict
ends the attempt (rolled back, so the worker's transaction goes on) to be tried again shortly.
A process that never waits can be in no cycle. A child inserted while the locks were being
taken makes the attempt start over too, so the delete that follows touches only rows it holds.

PostgreSQL only: SQLite has one writer at a time and no row locks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.db import DatabaseError, connection, transaction
from django.db.models import Model, QuerySet

from issuance.models import (
    Certificate,
    CertificateRequest,
    Challenge,
    DownloadToken,
    Order,
    Revocation,
    Secret,
    SecretExport,
)

T = TypeVar("T")

# A busy worker holds a row for milliseconds; these give it about five seconds in all.
ATTEMPTS = 40
PAUSE_STEP = 0.01  # seconds, growing by this much per attempt, at most PAUSE_MAX
PAUSE_MAX = 0.25
# SQLSTATEs that mean "someone else holds or changed a row we need": lock_not_available (NOWAIT),
# deadlock_detected and foreign_key_violation (a child committed after our scan).
CONTENDED = {"55P03", "40P01", "23503"}


class Contended(Exception):
    """Another transaction holds or added a row of the tree: roll back and try again."""


def _sqlstate(exc: BaseException) -> str:
    cause = exc.__cause__
    return str(getattr(cause, "sqlstate", "") or "")


def _tree(certificate_pks: Sequence[int]) -> tuple[frozenset[tuple[str, int]], ...]:
    """Every row below the certificates, or pointing at them, locked bottom-up with NOWAIT."""

    def lock(qs: QuerySet[Model]) -> frozenset[tuple[str, int]]:
        rows = qs.select_for_update(nowait=True, of=("self",)).values_list("pk", flat=True)
        label = qs.model._meta.label
        return frozenset((label, int(pk)) for pk in rows)

    pks = list(certificate_pks)
    return (
        lock(Challenge.objects.filter(order__request__certificate__in=pks)),
        lock(Order.objects.filter(request__certificate__in=pks)),
        lock(CertificateRequest.objects.filter(certificate__in=pks)),
        lock(Secret.objects.filter(certificate__in=pks)),
        lock(Revocation.objects.filter(certificate__in=pks)),
        lock(DownloadToken.objects.filter(certificate__in=pks)),
        lock(SecretExport.objects.filter(certificate__in=pks)),
    )


def lock_trees(names: Sequence[str]) -> list[Certificate]:
    """The named certificates (name and secret_name loaded), each with its whole tree locked
    by this transaction. Raises Contended when a row is held or a child appeared meanwhile."""
    found = list(Certificate.objects.filter(name__in=list(names)).values_list("pk", flat=True))
    before = _tree(found)
    certs = list(
        Certificate.objects.select_for_update(nowait=True)
        .filter(pk__in=found)
        .only("name", "secret_name")
    )
    # With the certificates locked nothing new can be inserted below them; anything inserted
    # between the first scan and now is found here, and not waited for.
    if _tree([c.pk for c in certs]) != before:
        raise Contended("rows were added below the certificates while they were being locked")
    return certs


def without_waiting(work: Callable[[], T]) -> T:
    """Run `work` (which takes its locks with lock_trees) in a transaction or savepoint of its
    own, again after a short pause whenever another transaction holds or adds a row it needs."""
    if connection.vendor != "postgresql":
        with transaction.atomic():
            return work()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    # Row locks are NOWAIT; this bounds any other wait (a statement that would
                    # wait on a row not yet locked) far below PostgreSQL's deadlock_timeout.
                    # (Foreign keys stay deferred: Django's delete relies on it, removing a
                    # parent before its children within the transaction.)
                    cursor.execute("SET LOCAL lock_timeout = '100ms'")
                result = work()
                with connection.cursor() as cursor:
                    # SET LOCAL lasts until the outer transaction ends (a failed attempt's is
                    # undone with its savepoint): give the caller's later statements, such as
                    # a bulk action's next batch, the usual wait back.
                    cursor.execute("SET LOCAL lock_timeout = DEFAULT")
                return result
        except Contended:
            pass
        except DatabaseError as exc:
            if _sqlstate(exc) not in CONTENDED:
                raise
        if attempt < ATTEMPTS:
            time.sleep(min(PAUSE_STEP * attempt, PAUSE_MAX))
    raise Contended(f"the rows stayed busy through {ATTEMPTS} attempts")
