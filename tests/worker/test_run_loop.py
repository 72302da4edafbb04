"""Worker.run() in a thread, as `serve` uses it: wake-ups, sleeping, stopping."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from issuance.models import Certificate, CertificateState
from issuance.worker.loop import Worker
from issuance.worker.wakeup import wake
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.helpers import wait_for
from tests.worker.threads import run_in_thread

pytestmark = pytest.mark.django_db(transaction=True)
EC = {"algorithm": "ECDSA", "size": 256}


# The threaded tests need PostgreSQL: pytest-django's in-memory SQLite is shared-cache,
# whose table locks fail at once where a real (file, WAL) database waits. The same loop on
# a file SQLite database is tested with real processes in test_sqlite_process.py.


@pytest.fixture
def running() -> Iterator[tuple[Worker, threading.Event, threading.Thread]]:
    worker = Worker(threads=2)
    stop = threading.Event()

    thread = run_in_thread(worker, stop)
    yield worker, stop, thread
    stop.set()
    worker.stop()
    thread.join(10)


def ready(name: str) -> bool:
    return Certificate.objects.filter(name=name, state=CertificateState.READY).exists()


@pytest.mark.postgres
def test_run_issues_and_stops(running: tuple[Worker, threading.Event, threading.Thread]) -> None:
    worker, stop, thread = running
    issuer = make_selfsigned_issuer()
    time.sleep(0.3)  # let it go idle first
    t0 = time.monotonic()
    cert = make_certificate("looped", issuer, privateKey=EC)
    wake(cert)  # what the API does after a create (notifies after commit)
    wait_for(lambda: ready("looped"), 30, "the looped certificate Ready")
    assert time.monotonic() - t0 < 10  # woken, not waiting for its 30 s safety cap
    t1 = time.monotonic()
    stop.set()
    worker.stop()
    thread.join(10)
    assert not thread.is_alive()
    assert time.monotonic() - t1 < 3
    assert worker.processed >= 3


def test_sqlite_sees_other_connections_commits() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("PRAGMA data_version is SQLite's; PostgreSQL uses LISTEN/NOTIFY")
    from issuance.worker.listen import SqliteWatcher

    make_selfsigned_issuer()
    watcher = SqliteWatcher()
    watcher.mark()
    assert not watcher.changed()

    def other() -> None:
        try:
            make_selfsigned_issuer("other")
        finally:
            connection.close()

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert watcher.changed()


@pytest.mark.postgres
def test_slow_item_does_not_block_the_others() -> None:
    from issuance.controllers.base import Result
    from issuance.controllers.registry import Controller

    issuer = make_selfsigned_issuer()
    slow_started = threading.Event()
    release_slow = threading.Event()
    done: list[str] = []

    def reconcile(cert: Certificate) -> Result:
        if cert.name == "slow":
            slow_started.set()
            release_slow.wait(20)  # an ACME call hanging until its timeout
        done.append(cert.name)
        return Result.done()

    make_certificate("slow", issuer)
    worker = Worker(threads=2)
    worker.controllers = [Controller("test", Certificate, reconcile)]
    worker.steps = []
    stop = threading.Event()

    thread = run_in_thread(worker, stop)
    try:
        assert slow_started.wait(10)
        for i in range(5):
            wake(make_certificate(f"fast-{i}", issuer))
        wait_for(lambda: len(done) == 5, 10, "five items done", poll=0.05)
        assert "slow" not in done
    finally:
        release_slow.set()
        stop.set()
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert done[-1] == "slow"  # finished before the worker stopped
    assert not Certificate.objects.exclude(lease_owner="").exists()


@pytest.mark.postgres
def test_a_reconcile_longer_than_the_lease_is_never_taken_over() -> None:
    """An ACME call may wait out its client timeout; with the default lease, the heartbeat
    keeps the row this worker's all along, while another worker keeps trying to claim it."""
    from issuance.controllers.base import Result
    from issuance.controllers.registry import Controller

    cert = make_certificate("long", make_selfsigned_issuer())
    lease = settings.WORKER_LEASE.total_seconds()
    finished = threading.Event()

    def reconcile(c: Certificate) -> Result:
        time.sleep(lease + 5)  # longer than one lease: only renewals keep it
        finished.set()
        return Result.done()

    worker = Worker(threads=2, worker_id="holder")
    worker.controllers = [Controller("test", Certificate, reconcile)]
    worker.steps = []
    stop = threading.Event()
    thread = run_in_thread(worker, stop)
    other = Worker(threads=1, worker_id="thief")
    other.controllers = worker.controllers
    stolen = []
    try:
        wait_for(lambda: Certificate.objects.filter(lease_owner="holder").exists(), 10, "held")
        first = Certificate.objects.get(pk=cert.pk).lease_until
        leases = set()
        while not finished.is_set():
            stolen += other.claim_rows(10)
            leases.add(Certificate.objects.get(pk=cert.pk).lease_until)
            time.sleep(0.25)
        assert first is not None
        assert max(x for x in leases if x is not None) > first + settings.WORKER_LEASE / 2
    finally:
        stop.set()
        worker.stop()
        thread.join(10)
    assert stolen == []
    cert.refresh_from_db()
    assert cert.lease_owner == "" and cert.due_at is None


def test_run_once_holds_its_items_in_the_heartbeat_while_they_run() -> None:
    """run_once() and tick() claim through the same path as run(): the heartbeat renews."""
    from issuance.controllers.base import Result
    from issuance.controllers.registry import Controller

    make_certificate("held", make_selfsigned_issuer())
    seen: list[list[Any]] = []
    worker = Worker(threads=1, worker_id="once")

    def reconcile(c: Certificate) -> Result:
        seen.append([pk for _model, pk in worker.heartbeat.held()])
        return Result.done()

    worker.controllers = [Controller("test", Certificate, reconcile)]
    worker.steps = []
    assert worker.run_once() == 1
    assert seen == [[Certificate.objects.get(name="held").pk]]
    assert worker.heartbeat.held() == []  # released, no longer renewed
