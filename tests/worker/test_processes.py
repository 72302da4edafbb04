"""Real `manage.py reconcile` processes against the test database (PostgreSQL).

SIGTERM stops a worker cleanly; SIGKILL mid-way loses nothing; two workers never
reconcile the same object at the same time.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from issuance.models import Certificate, CertificateRequest, CertificateState, Secret
from issuance.pki.x509 import cert_info
from tests.controllers.helpers import csr_key_der
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]
EC = {"algorithm": "ECDSA", "size": 256}


def worker_env(**extra: str) -> dict[str, str]:
    s = connection.settings_dict
    url = f"postgresql://{s['USER']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISSUANCE_")}
    env.update(
        DATABASE_URL=url,
        KEY_ENCRYPTION_KEY=settings.KEY_ENCRYPTION_KEY,
        PYTHONUNBUFFERED="1",
        **extra,
    )
    return env


def start(*args: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "reconcile", *args],
        cwd=ROOT,
        env=worker_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "reconcile", *args],
        cwd=ROOT,
        env=worker_env(**env),
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
    )


def wait_until(predicate: Any, timeout: float = 90.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def all_ready(n: int) -> bool:
    return Certificate.objects.filter(state=CertificateState.READY).count() == n


def assert_issued_once(cert: Certificate) -> None:
    requests = list(CertificateRequest.objects.filter(certificate=cert))
    assert [r.revision for r in requests] == [1], cert.name
    issued = cert_info(Secret.objects.get(name=cert.secret_name).tls_crt).public_key_der
    assert issued == csr_key_der(requests[0]), cert.name


def test_sigterm_stops_cleanly(procs: list[subprocess.Popen[str]]) -> None:
    make_certificate("term", make_selfsigned_issuer(), privateKey=EC)
    proc = start("--threads", "2")
    procs.append(proc)
    assert wait_until(lambda: all_ready(1)), "worker did not issue"
    time.sleep(0.5)  # now idle, sleeping on LISTEN
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert time.monotonic() - t0 < 5
    assert "stopped after" in out
    assert not Certificate.objects.exclude(lease_owner="").exists()


def test_wakeup_via_notify(procs: list[subprocess.Popen[str]]) -> None:
    """An idle worker picks up new work at once (NOTIFY), not after its 30 s cap."""
    issuer = make_selfsigned_issuer()
    proc = start("--threads", "1")
    procs.append(proc)
    time.sleep(2)  # idle
    from issuance.wakeup import notify_workers

    t0 = time.monotonic()
    make_certificate("late", issuer, privateKey=EC)
    notify_workers()
    assert wait_until(lambda: all_ready(1), timeout=20)
    assert time.monotonic() - t0 < 10


def test_once_drains_and_exits() -> None:
    issuer = make_selfsigned_issuer()
    for i in range(3):
        make_certificate(f"once-{i}", issuer, privateKey=EC)
    result = run("--once", "--threads", "2")
    assert result.returncode == 0, result.stderr
    assert all_ready(3)
    for cert in Certificate.objects.all():
        assert_issued_once(cert)


def test_process_killed_at_checkpoint_then_restarted() -> None:
    """A real death (SIGKILL) right after the request was created; a new process finishes."""
    make_certificate("killed", make_selfsigned_issuer(), privateKey=EC)
    result = run(
        "--once",
        "--threads",
        "1",
        ISSUANCE_CRASH_AT="after-request-created",
        ISSUANCE_CRASH_MODE="kill",
        WORKER_LEASE="1",
    )
    assert result.returncode == -signal.SIGKILL
    cert = Certificate.objects.get(name="killed")
    assert cert.lease_owner != ""  # the dead process still holds it
    assert CertificateRequest.objects.filter(certificate=cert).count() == 1
    time.sleep(1.2)  # its lease expires
    result = run("--once", "--threads", "1")
    assert result.returncode == 0, result.stderr
    cert.refresh_from_db()
    assert cert.state == CertificateState.READY
    assert_issued_once(cert)


def test_sigkill_midway_then_restart(procs: list[subprocess.Popen[str]]) -> None:
    issuer = make_selfsigned_issuer()
    n = 30
    for i in range(n):
        make_certificate(f"mid-{i:02d}", issuer, privateKey=EC)
    proc = start("--threads", "4", WORKER_LEASE="2")
    procs.append(proc)
    assert wait_until(lambda: CertificateRequest.objects.count() >= 3, timeout=60)
    proc.kill()
    proc.wait(10)
    assert not all_ready(n)
    time.sleep(2.2)
    result = run("--once", "--threads", "4")
    assert result.returncode == 0, result.stderr
    assert all_ready(n)
    for cert in Certificate.objects.all():
        assert_issued_once(cert)


def test_two_workers_never_reconcile_the_same_object_at_once(
    procs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    issuer = make_selfsigned_issuer()
    n = 40
    for i in range(n):
        make_certificate(f"two-{i:02d}", issuer, privateKey=EC)
    trace = tmp_path / "trace.log"
    for name in ("a", "b"):
        procs.append(
            start("--threads", "4", "--worker-id", name, ISSUANCE_RECONCILE_TRACE=str(trace))
        )
    assert wait_until(lambda: all_ready(n), timeout=120)
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=15)
        assert proc.returncode == 0
    spans: dict[tuple[str, str], list[tuple[int, int, str]]] = defaultdict(list)
    pids = set()
    for line in trace.read_text().splitlines():
        pid, ctrl, pk, begin, end = line.split()
        spans[(ctrl, pk)].append((int(begin), int(end), pid))
        pids.add(pid)
    assert len(pids) == 2, "both workers should have done some of the work"
    assert sum(len(v) for v in spans.values()) >= 3 * n
    for key, items in spans.items():
        items.sort()
        for (_b1, e1, p1), (b2, _e2, p2) in itertools.pairwise(items):
            assert e1 <= b2, f"{key} reconciled by {p1} and {p2} at the same time"
    for cert in Certificate.objects.all():
        assert_issued_once(cert)
