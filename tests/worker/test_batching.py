"""Fewer statements per issuance: timeline entries written per pass, claims of free threads
only, NOTIFYs folded together; and what each must still guarantee."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from django.conf import settings
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from issuance.controllers.base import Result
from issuance.controllers.registry import Controller
from issuance.models import Certificate, Event
from issuance.observability import events
from issuance.worker import wakeup
from issuance.worker.loop import Worker
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.worker.threads import run_in_thread

pytestmark = pytest.mark.django_db(transaction=True)


def event_inserts(ctx: CaptureQueriesContext) -> int:
    return sum('INSERT INTO "issuance_event"' in q["sql"] for q in ctx.captured_queries)


def test_entries_of_a_batch_are_written_together_at_its_end() -> None:
    with CaptureQueriesContext(connection) as ctx, events.batched():
        for reason in ("One", "Two", "Three"):
            events.record("Certificate", "b", reason, certificate_name="b")
        assert not Event.objects.filter(name="b").exists()
    assert event_inserts(ctx) == 1
    rows = list(Event.objects.filter(name="b").order_by("id"))
    assert [e.reason for e in rows] == ["One", "Two", "Three"]
    assert rows[0].created_at <= rows[1].created_at <= rows[2].created_at


def test_entries_of_a_rolled_back_transaction_are_dropped() -> None:
    with events.batched():
        with transaction.atomic():
            events.record("Certificate", "r", "Kept")
        with pytest.raises(RuntimeError), transaction.atomic():
            events.record("Certificate", "r", "RolledBack")
            raise RuntimeError("the step failed")
        events.record("Certificate", "r", "After")
    assert list(Event.objects.filter(name="r").order_by("id").values_list("reason", flat=True)) == [
        "Kept",
        "After",
    ]


def test_without_a_batch_or_inside_a_callers_transaction_entries_are_written_at_once() -> None:
    events.record("Certificate", "now", "Immediate")
    assert Event.objects.filter(name="now").exists()
    # Inside the caller's transaction (it may roll back): no batching.
    with transaction.atomic(), events.batched():
        events.record("Certificate", "now", "InTransaction")
        assert Event.objects.filter(name="now", reason="InTransaction").exists()


def test_a_worker_pass_writes_its_entries_in_one_insert() -> None:
    make_certificate("pass", make_selfsigned_issuer())

    def reconcile(cert: Certificate) -> Result:
        events.record("Certificate", cert.name, "First", certificate_name=cert.name)
        with transaction.atomic():
            events.record("Certificate", cert.name, "Second", certificate_name=cert.name)
        return Result.done()

    worker = Worker(worker_id="batch", threads=1)
    worker.controllers = [Controller("test", Certificate, reconcile)]
    worker.steps = []
    with CaptureQueriesContext(connection) as ctx:
        assert worker.run_once() == 1
    assert event_inserts(ctx) == 1
    assert Event.objects.filter(name="pass", reason__in=["First", "Second"]).count() == 2


@pytest.fixture
def blocking_worker() -> Iterator[tuple[Worker, threading.Event, list[str], threading.Event]]:
    gate = threading.Event()
    started: list[str] = []
    stop = threading.Event()

    def reconcile(cert: Certificate) -> Result:
        started.append(cert.name)
        gate.wait(20)
        return Result.done()

    worker = Worker(worker_id="ahead", threads=2)
    worker.controllers = [Controller("test", Certificate, reconcile)]
    worker.steps = []
    yield worker, gate, started, stop
    gate.set()
    stop.set()
    worker.stop()


@pytest.mark.postgres
def test_claims_no_more_than_free_threads_and_stops_with_nothing_held(
    blocking_worker: tuple[Worker, threading.Event, list[str], threading.Event],
) -> None:
    worker, gate, started, stop = blocking_worker
    issuer = make_selfsigned_issuer()
    for i in range(6):
        make_certificate(f"ahead-{i}", issuer)

    thread = run_in_thread(worker, stop)
    deadline = time.monotonic() + 10
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(started) == 2
    time.sleep(0.3)  # the loop had time to claim more, had it wanted to
    # Two threads, two running items, two rows leased: none waits in a queue in the process
    # (it would be held from other workers, and die with this one).
    assert Certificate.objects.filter(lease_owner="ahead").count() == 2
    stop.set()
    worker.stop()
    gate.set()
    thread.join(10)
    assert not thread.is_alive()
    assert len(started) == 2  # the other four were never claimed...
    assert not Certificate.objects.exclude(lease_owner="").exists()  # ...nothing is held
    assert Certificate.objects.filter(due_at__isnull=False).count() == 4  # still due


@pytest.mark.postgres
def test_a_burst_of_wakeups_sends_two_notifies_and_none_is_lost() -> None:
    db = settings.DATABASES["default"]
    listener = psycopg.connect(
        host=db["HOST"], port=db["PORT"], user=db["USER"], dbname=db["NAME"], autocommit=True
    )
    try:
        listener.execute(f"LISTEN {wakeup.NOTIFY_CHANNEL}")
        wakeup._last_sent = -1.0  # no earlier NOTIFY in this process
        connection.ensure_connection()
        assert connection.connection is not None
        own = connection.connection.info.backend_pid
        for _ in range(20):
            wakeup.notify_workers()
        # Read together: on a loaded machine the listener may first read after both arrived.
        burst = list(listener.notifies(timeout=5.0, stop_after=2))
        burst += listener.notifies(timeout=1.0)
        assert len(burst) == 2, burst
        # The first of the burst was sent on this thread's connection before
        # notify_workers() returned; the other 19 fold into one, sent at the end of the gap
        # by the notifier thread, on its own connection.
        assert burst[0].pid == own and burst[1].pid != own, (own, burst)
        time.sleep(wakeup.NOTIFY_GAP)
        wakeup.notify_workers()  # a lone wake-up after the gap is sent at once, not held back
        assert wakeup._trailing is None
        assert len(list(listener.notifies(timeout=5.0, stop_after=1))) == 1
        assert len(list(listener.notifies(timeout=0.5))) == 0
    finally:
        listener.close()


@pytest.mark.postgres
def test_the_release_writes_the_pass_entries_and_survives_a_refused_one() -> None:
    cert = make_certificate("entries", make_selfsigned_issuer())
    Certificate.objects.filter(pk=cert.pk).update(due_at=timezone.now())
    reasons = iter(["Fine", "x" * 200])  # the second is longer than Event.reason allows

    def reconcile(c: Certificate) -> Result:
        events.record("Certificate", c.name, next(reasons), "a step", certificate_name=c.name)
        return Result.done()

    worker = Worker(worker_id="w1", threads=1)
    worker.controllers = [Controller("test", Certificate, reconcile)]
    worker.steps = []
    with CaptureQueriesContext(connection) as ctx:
        assert worker.tick() is True
    # entry and release in one statement
    released = [q["sql"] for q in ctx.captured_queries if "lease_owner = ''" in q["sql"]]
    assert len(released) == 1 and "INSERT INTO" in released[0]
    assert Event.objects.filter(name="entries", reason="Fine").count() == 1
    row = Certificate.objects.get(pk=cert.pk)
    assert row.lease_owner == "" and row.due_at is None
    # a refused entry is logged and dropped; the row is released all the same
    Certificate.objects.filter(pk=cert.pk).update(due_at=timezone.now())
    assert worker.tick() is True
    row = Certificate.objects.get(pk=cert.pk)
    assert row.lease_owner == "" and row.due_at is None
    assert not Event.objects.filter(name="entries").exclude(reason="Fine").exists()
