"""The worker's queue mechanics: claim, lease, release, wake during reconcile, errors."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from issuance.controllers import faults
from issuance.controllers.base import PermanentError, Result, TemporaryError
from issuance.controllers.registry import Controller
from issuance.models import Certificate, Event
from issuance.worker.loop import Worker
from issuance.worker.wakeup import wake
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db


def worker_with(fn: Callable[[Certificate], Result], worker_id: str = "w1") -> Worker:
    worker = Worker(worker_id=worker_id, threads=1)
    worker.controllers = [Controller("test", Certificate, fn)]
    worker.steps = []
    return worker


@pytest.fixture
def cert() -> Certificate:
    return make_certificate("q", make_selfsigned_issuer())


def reload(cert: Certificate) -> Certificate:
    cert.refresh_from_db()
    return cert


def test_claim_leases_and_excludes_others(cert: Certificate) -> None:
    w1 = worker_with(lambda c: Result.done(), "w1")
    w2 = worker_with(lambda c: Result.done(), "w2")
    claims = [c for _, c in w1.claim_rows(10)]
    assert [c.pk for c in claims] == [cert.pk]
    row = reload(cert)
    assert row.lease_owner == "w1"
    # The default lease: short, because the heartbeat renews it while the item runs.
    assert timedelta(seconds=20) == settings.WORKER_LEASE
    assert row.lease_until is not None
    assert timedelta(seconds=15) < row.lease_until - timezone.now() <= settings.WORKER_LEASE
    assert [c for _, c in w2.claim_rows(10)] == []
    # an expired lease can be taken over
    Certificate.objects.filter(pk=cert.pk).update(lease_until=timezone.now() - timedelta(1))
    assert [c.pk for c in [c for _, c in w2.claim_rows(10)]] == [cert.pk]
    assert reload(cert).lease_owner == "w2"


def test_not_due_not_claimed(cert: Certificate) -> None:
    Certificate.objects.filter(pk=cert.pk).update(due_at=timezone.now() + timedelta(minutes=1))
    w = worker_with(lambda c: Result.done())
    assert w.claim_rows(10) == []
    Certificate.objects.filter(pk=cert.pk).update(due_at=None)
    assert w.claim_rows(10) == []
    assert w.run_once() == 0


def test_release_sets_next_due_and_clears_lease(cert: Certificate) -> None:
    Certificate.objects.filter(pk=cert.pk).update(error_count=3, last_error="old")
    w = worker_with(lambda c: Result.after(timedelta(minutes=10)))
    before = timezone.now()
    assert w.run_once() == 1
    row = reload(cert)
    assert row.lease_owner == "" and row.lease_until is None
    assert row.error_count == 0 and row.last_error == ""
    assert row.due_at is not None
    assert before + timedelta(minutes=10) <= row.due_at <= timezone.now() + timedelta(minutes=10)


def test_done_clears_due(cert: Certificate) -> None:
    w = worker_with(lambda c: Result.done())
    w.run_once()
    assert reload(cert).due_at is None


def test_wake_during_reconcile_is_not_lost(cert: Certificate) -> None:
    calls: list[int] = []

    def reconcile(c: Certificate) -> Result:
        calls.append(1)
        if len(calls) == 1:
            wake(c)  # someone (API, another controller) wants a fresh look meanwhile
        return Result.done()

    w = worker_with(reconcile)
    w.run_once()
    assert len(calls) == 2  # the wake-up made it due again at once
    assert reload(cert).due_at is None


def test_wake_with_later_time_keeps_earlier_requeue(cert: Certificate) -> None:
    def reconcile(c: Certificate) -> Result:
        wake(c, at=timezone.now() + timedelta(hours=5))
        return Result.after(timedelta(minutes=1))

    w = worker_with(reconcile)
    w.run_once()
    row = reload(cert)
    assert row.due_at is not None and row.due_at <= timezone.now() + timedelta(minutes=1)


def test_temporary_error_with_delay(cert: Certificate) -> None:
    def reconcile(c: Certificate) -> Result:
        raise TemporaryError("CA busy", delay=timedelta(seconds=42))

    w = worker_with(reconcile)
    w.run_once()
    row = reload(cert)
    assert row.error_count == 1 and row.last_error == "CA busy"
    assert row.due_at is not None
    remaining = row.due_at - timezone.now()
    assert timedelta(seconds=40) < remaining <= timedelta(seconds=42)
    assert row.lease_owner == ""


def test_errors_back_off_exponentially(cert: Certificate) -> None:
    def reconcile(c: Certificate) -> Result:
        raise RuntimeError("boom")

    w = worker_with(reconcile)
    waits = []
    for _ in range(4):
        Certificate.objects.filter(pk=cert.pk).update(due_at=timezone.now())
        w.run_once()
        row = reload(cert)
        assert row.due_at is not None
        waits.append(round((row.due_at - timezone.now()).total_seconds()))
    assert waits == [1, 2, 4, 8]
    assert row.error_count == 4 and row.last_error == "RuntimeError: boom"


def test_permanent_error_stops_and_records_event(cert: Certificate) -> None:
    def reconcile(c: Certificate) -> Result:
        raise PermanentError("spec cannot work")

    w = worker_with(reconcile)
    w.run_once()
    row = reload(cert)
    assert row.due_at is None and row.last_error == "spec cannot work"
    event = Event.objects.get(kind="Certificate", name="q", reason="ReconcileError")
    assert event.type == Event.WARNING and event.certificate_name == "q"


def test_release_only_by_lease_owner(cert: Certificate) -> None:
    def reconcile(c: Certificate) -> Result:
        # our lease expired and another worker took the row meanwhile
        Certificate.objects.filter(pk=c.pk).update(lease_owner="other")
        return Result.done()

    w = worker_with(reconcile)
    w.run_once()
    row = reload(cert)
    assert row.lease_owner == "other" and row.due_at is not None


def test_simulated_crash_keeps_lease(cert: Certificate) -> None:
    def reconcile(c: Certificate) -> Result:
        faults.checkpoint("after-key-stored")
        return Result.done()

    faults.CRASH_AT = "after-key-stored"
    try:
        with pytest.raises(faults.SimulatedCrash):
            worker_with(reconcile).run_once()
    finally:
        faults.CRASH_AT = None
    row = reload(cert)
    assert row.lease_owner == "w1" and row.due_at is not None


def test_next_due(cert: Certificate) -> None:
    w = worker_with(lambda c: Result.done())
    soon = timezone.now() + timedelta(seconds=30)
    Certificate.objects.filter(pk=cert.pk).update(due_at=soon)
    assert w.next_due() == soon
    # a row leased by someone else counts from its lease expiry
    until = timezone.now() + timedelta(seconds=90)
    Certificate.objects.filter(pk=cert.pk).update(
        due_at=timezone.now(), lease_owner="x", lease_until=until
    )
    assert w.next_due() == until
    Certificate.objects.filter(pk=cert.pk).update(due_at=None, lease_owner="", lease_until=None)
    assert w.next_due() is None


def test_run_once_counts_and_tick(cert: Certificate) -> None:
    seen: list[int] = []

    def reconcile(c: Certificate) -> Result:
        seen.append(c.pk)
        return Result.now() if len(seen) < 3 else Result.done()

    w = worker_with(reconcile)
    assert w.run_once() == 3
    assert w.tick() is False


def test_steps_run_each_tick() -> None:
    from issuance.controllers.registry import Step

    runs: list[int] = []
    w = Worker(threads=1)
    w.controllers = []

    def step() -> bool:
        runs.append(1)
        return len(runs) < 3

    w.steps = [Step("s", step)]
    w.run_once()
    assert len(runs) == 3


def test_real_registry_drains(cert: Certificate) -> None:
    assert Worker(threads=1).run_once() > 0
    assert reload(cert).state == "Ready"
