"""Worker.run() in a thread, as `serve` uses it: wake-ups, sleeping, stopping."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from django.db import connection

from issuance.models import Certificate, CertificateState
from issuance.wakeup import wake
from issuance.worker import Worker
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db(transaction=True)
EC = {"algorithm": "ECDSA", "size": 256}


def wait_for(predicate: object, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def running() -> Iterator[tuple[Worker, threading.Event, threading.Thread]]:
    worker = Worker(threads=2)
    stop = threading.Event()

    def target() -> None:
        try:
            worker.run(stop)
        finally:
            connection.close()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    yield worker, stop, thread
    stop.set()
    worker.stop()
    thread.join(10)


def ready(name: str) -> bool:
    return Certificate.objects.filter(name=name, state=CertificateState.READY).exists()


def test_run_issues_and_stops(running: tuple[Worker, threading.Event, threading.Thread]) -> None:
    worker, stop, thread = running
    issuer = make_selfsigned_issuer()
    time.sleep(0.3)  # let it go idle first
    t0 = time.monotonic()
    cert = make_certificate("looped", issuer, privateKey=EC)
    wake(cert)  # what the API does after a create (notifies after commit)
    assert wait_for(lambda: ready("looped"))
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
    from issuance.worker_listen import SqliteWatcher

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
