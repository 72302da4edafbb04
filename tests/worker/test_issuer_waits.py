"""Objects that wait on a condition of their issuer are looked at once and parked, and due
work is served fairly: every due row is looked at within one pass cycle (issue 26, item 2;
issuance/acme/issuer_waits.py).

The worker's claim and `process` run here on the test's connection (no pool threads), so
the same tests run on SQLite and PostgreSQL; the global steps are left out because they do
not reconcile rows.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from issuance.acme.issuer_waits import SAFETY_NET, wake_waiters
from issuance.controllers.base import Result
from issuance.models import CertificateRequest, Issuer, Order
from issuance.timing.backoff import error_backoff
from issuance.worker.loop import Claim, Worker
from tests.factories import make_acme_issuer

pytestmark = pytest.mark.django_db

WAITING = 120  # orders of an issuer without an account
OTHERS = 30  # other due rows (issuers that can sign at once)
BATCH = 8  # the worker's default number of threads: what one claim takes


def _orders_waiting(issuer: Issuer, count: int) -> list[Order]:
    now = timezone.now()
    requests = CertificateRequest.objects.bulk_create(
        CertificateRequest(name=f"wait-{i}", issuer=issuer, spec={"request": ""})
        for i in range(count)
    )
    return Order.objects.bulk_create(
        Order(
            name=f"wait-{i}",
            request=request,
            issuer=issuer,
            spec={"dnsNames": [f"wait-{i}.example.test"]},
            due_at=now,
        )
        for i, request in enumerate(requests)
    )


def _other_due_rows(count: int) -> list[Issuer]:
    now = timezone.now()
    return Issuer.objects.bulk_create(
        Issuer(name=f"other-{i}", kind="selfSigned", spec={"selfSigned": {}}, due_at=now)
        for i in range(count)
    )


def _counting_worker(looks: list[tuple[str, Any]]) -> Worker:
    """A one-thread worker whose controllers note each look (kind, pk) before reconciling."""
    worker = Worker(threads=1)

    def counted(reconcile: Any) -> Any:
        def run(obj: Any) -> Result:
            looks.append((type(obj).__name__, obj.pk))
            result: Result = reconcile(obj)
            return result

        return run

    worker.controllers = [replace(c, reconcile=counted(c.reconcile)) for c in worker.controllers]
    return worker


def _pass_cycle(worker: Worker) -> int:
    """Claim and process due rows, BATCH at a time, until none is due; rows claimed."""
    claimed = 0
    while True:
        items = worker.claim_rows(BATCH)
        if not items:
            return claimed
        claimed += len(items)
        for ctrl, claim in items:
            worker.process(ctrl, claim)


def test_waiting_orders_are_parked_and_every_due_row_is_seen_in_one_cycle() -> None:
    acme = make_acme_issuer("no-account")
    # The issuer's own registration was refused: it looks again on its recheck, not now.
    Issuer.objects.filter(pk=acme.pk).update(due_at=timezone.now() + timedelta(minutes=10))
    orders = _orders_waiting(acme, WAITING)
    others = _other_due_rows(OTHERS)
    looks: list[tuple[str, Any]] = []
    worker = _counting_worker(looks)
    try:
        started = timezone.now()
        _pass_cycle(worker)

        # One cycle looked at every due row, each once: none went round twice before all had
        # their turn.
        expected = {("Order", o.pk) for o in orders} | {("Issuer", i.pk) for i in others}
        assert len(looks) == len(expected)
        assert set(looks) == expected

        # The waiting orders are parked, naming what they wait for, not on a 5 s timer.
        parked = Order.objects.filter(issuer=acme)
        assert parked.filter(due_at__lt=started + SAFETY_NET - timedelta(seconds=5)).count() == 0
        assert set(parked.values_list("last_error", flat=True)) == {
            "Issuer no-account has no registered ACME account yet"
        }

        # While the condition holds, they are not retried: past the worker's own first ACME
        # backoff (what a waiting order used to come back after), nothing is due.
        time.sleep(error_backoff(1, acme=True).total_seconds() + 0.5)
        assert _pass_cycle(worker) == 0
        assert len(looks) == len(expected)

        # The issuer's account is registered: every waiter is due at once, and one cycle
        # looks at each of them once more.
        woken = wake_waiters(acme)
        assert woken == WAITING
        looks.clear()
        _pass_cycle(worker)
        assert sorted(looks) == sorted(("Order", o.pk) for o in orders)
    finally:
        worker.close()


def test_rows_retried_at_once_do_not_starve_the_others() -> None:
    """Rows that are due again the moment they are released (retried again and again) go
    behind every row that was due before them: a cycle reaches each due row once."""
    acme = make_acme_issuer("busy")
    Issuer.objects.filter(pk=acme.pk).update(due_at=None)
    busy = _orders_waiting(acme, WAITING)
    others = _other_due_rows(OTHERS)
    busy_ids = {o.pk for o in busy}
    looks: list[tuple[str, Any]] = []
    worker = _counting_worker(looks)

    def again_at_once(reconcile: Any) -> Any:
        def run(obj: Any) -> Result:
            if isinstance(obj, Order) and obj.pk in busy_ids:
                looks.append(("Order", obj.pk))
                return Result.after(timedelta(milliseconds=1))
            result: Result = reconcile(obj)
            return result

        return run

    worker.controllers = [
        replace(c, reconcile=again_at_once(c.reconcile)) for c in worker.controllers
    ]
    try:
        seen: set[tuple[str, Any]] = set()
        expected = {("Order", pk) for pk in busy_ids} | {("Issuer", i.pk) for i in others}
        # One cycle: as many claims of BATCH as it takes to claim every due row once.
        cycle = -(-len(expected) // BATCH) * BATCH
        claims = 0
        while seen != expected and claims < cycle:
            items = worker.claim_rows(BATCH)
            claims += len(items)
            for ctrl, claim in items:
                worker.process(ctrl, Claim(claim.pk, claim.wake_seq, claim.error_count))
            seen |= set(looks)
        # Every due row within one cycle's worth of claims, although the busy ones were
        # due again each time.
        assert seen == expected
        assert claims <= cycle
    finally:
        worker.close()
