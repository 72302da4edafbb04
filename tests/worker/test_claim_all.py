"""The one-statement claim over every controller's table (PostgreSQL) and inline steps."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.controllers.base import Result
from issuance.controllers.registry import Controller
from issuance.fastpaths.claim_statements import claim_all
from issuance.models import Certificate, Issuer
from issuance.worker.loop import INLINE_STEPS, Worker
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db


def _due(model: type[Certificate] | type[Issuer], pk: int, seconds_ago: float) -> None:
    moment = timezone.now() - timedelta(seconds=seconds_ago)
    model.objects.filter(pk=pk).update(due_at=moment, lease_owner="", lease_until=None)


@pytest.mark.postgres
def test_claim_all_takes_the_oldest_over_all_tables_and_leases_them() -> None:
    issuer = make_selfsigned_issuer()
    certs = [make_certificate(f"c{i}", issuer) for i in range(3)]
    _due(Issuer, issuer.pk, 50)
    for i, cert in enumerate(certs):
        _due(Certificate, cert.pk, 40 - 10 * i)  # c0 oldest
    Certificate.objects.filter(pk=certs[2].pk).update(due_at=timezone.now() + timedelta(hours=1))
    now = timezone.now()
    until = now + timedelta(minutes=5)
    models = [Issuer, Certificate]
    got = claim_all(models, 2, "w1", now, until)
    # The two oldest due rows, oldest first, from both tables.
    assert [(k, pk) for k, pk, _, _ in got] == [(0, issuer.pk), (1, certs[0].pk)]
    assert Issuer.objects.get(pk=issuer.pk).lease_owner == "w1"
    assert Certificate.objects.get(pk=certs[0].pk).lease_until == until
    # Leased rows are not claimed again; the not-yet-due row is never claimed.
    again = claim_all(models, 10, "w2", now, until)
    assert [(k, pk) for k, pk, _, _ in again] == [(1, certs[1].pk)]
    assert Certificate.objects.get(pk=certs[1].pk).lease_owner == "w2"
    assert Certificate.objects.get(pk=certs[2].pk).lease_owner == ""
    assert claim_all(models, 10, "w3", now, until) == []
    # An expired lease can be taken over.
    Certificate.objects.filter(pk=certs[0].pk).update(lease_until=now - timedelta(seconds=1))
    assert [pk for _, pk, _, _ in claim_all(models, 10, "w3", now, until)] == [certs[0].pk]


def test_result_now_continues_inline_under_the_lease() -> None:
    cert = make_certificate("inline", make_selfsigned_issuer())
    seen: list[str] = []

    def reconcile(c: Certificate) -> Result:
        seen.append(c.lease_owner)
        return Result.now() if len(seen) < 3 else Result.done()

    worker = Worker(worker_id="w1", threads=1)
    worker.controllers = [Controller("test", Certificate, reconcile)]
    worker.steps = []
    assert worker.tick() is True
    assert seen == ["w1", "w1", "w1"]
    assert worker.processed == 3
    row = Certificate.objects.get(pk=cert.pk)
    assert row.due_at is None and row.lease_owner == ""


def test_inline_steps_are_bounded() -> None:
    cert = make_certificate("busy", make_selfsigned_issuer())
    calls: list[int] = []

    def reconcile(c: Certificate) -> Result:
        calls.append(1)
        return Result.now()  # always "now": the row goes back to the queue, due now

    worker = Worker(worker_id="w1", threads=1)
    worker.controllers = [Controller("test", Certificate, reconcile)]
    worker.steps = []
    assert worker.tick() is True
    assert len(calls) == INLINE_STEPS
    row = Certificate.objects.get(pk=cert.pk)
    assert row.lease_owner == "" and row.due_at is not None and row.due_at <= timezone.now()


@pytest.mark.postgres
def test_claim_all_takes_turns_between_tables() -> None:
    """A backlog of one kind does not hold back another kind's newer due rows."""
    issuer = make_selfsigned_issuer()
    certs = [make_certificate(f"old{i}", issuer) for i in range(5)]
    for i, cert in enumerate(certs):
        _due(Certificate, cert.pk, 100 - i)
    _due(Issuer, issuer.pk, 1)  # the newest due row of all
    now = timezone.now()
    got = claim_all([Issuer, Certificate], 2, "w1", now, now + timedelta(minutes=5))
    assert sorted(k for k, _, _, _ in got) == [0, 1]
    assert {pk for k, pk, _, _ in got if k == 1} == {certs[0].pk}
