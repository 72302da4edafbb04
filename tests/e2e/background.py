"""The real worker loop in a thread of the test process, and a viewer to read pages as.

For end-to-end tests that act on real servers (stop, freeze, restart them) while the worker
runs with its defaults (WORKER_THREADS threads), and that read what it did from the
database or from this process's counters. Threads need their own database connections:
use with PostgreSQL (mark the test `postgres`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from django.contrib.auth.models import User

from issuance.access.roles import VIEWER
from issuance.models import AcmeServer, Certificate, Issuer
from issuance.worker.loop import Worker
from issuance.worker.wakeup import notify_workers
from tests.factories import make_certificate
from tests.helpers import wait_for

ECDSA = {"algorithm": "ECDSA", "size": 256}


@contextlib.contextmanager
def running_worker() -> Iterator[Worker]:
    worker = Worker()
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, args=(stop,), name="worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        stop.set()
        thread.join(90)
        assert not thread.is_alive(), "the worker did not stop"


def make_viewer(username: str = "e2e-viewer") -> User:
    """A user with the viewer role."""
    from tests.factories import role_group

    user = User.objects.create_user(username=username)
    user.groups.add(role_group(VIEWER))
    return user


def all_ready(names: list[str]) -> bool:
    return Certificate.objects.filter(name__in=names, state="Ready").count() == len(names)


def outage_record(url: str) -> AcmeServer | None:
    """The CA's AcmeServer row while it is recorded unreachable, else None."""
    return AcmeServer.objects.filter(directory_url=url, unreachable_since__isnull=False).first()


def warm_up(issuer: Issuer, name: str) -> None:
    """One certificate before an outage: the issuer is registered and the path is warm."""
    wait_for(lambda: Issuer.objects.get(pk=issuer.pk).is_ready, 30, "issuer ready")
    make_certificate(name, issuer, dnsNames=[f"{name}.example.test"], privateKey=ECDSA)
    notify_workers()
    wait_for(lambda: all_ready([name]), 60, "warm-up certificate Ready")
