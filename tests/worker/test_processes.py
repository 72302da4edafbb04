"""Real `manage.py reconcile` processes against the test database (PostgreSQL).

SIGTERM stops a worker cleanly; SIGKILL at any point loses nothing and, with the default
lease, holds nothing up for more than 30 s; two workers never reconcile the same object at
the same time.
"""

from __future__ import annotations

import itertools
import os
import select
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from issuance.controllers import faults
from issuance.models import (
    Certificate,
    CertificateRequest,
    CertificateState,
    Secret,
    WorkerBeat,
)
from issuance.pki.x509 import cert_info
from tests.controllers.helpers import csr_key_der
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.helpers import wait_for

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
    wait_for(lambda: all_ready(1), 90, "the worker issued", poll=0.2)
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
    from issuance.worker.loop import IDLE_CAP
    from issuance.worker.wakeup import notify_workers

    issuer = make_selfsigned_issuer()
    proc = start("--threads", "1")
    procs.append(proc)
    # Idle: its first beat is written as its loop starts, and with nothing to do the first
    # pass ends within milliseconds. (A fixed sleep was not enough on a loaded machine: the
    # process was still importing, and its start-up counted as the wake-up's time.)
    wait_for(lambda: WorkerBeat.objects.filter(pid=proc.pid).exists(), 60, "the worker's beat")
    time.sleep(1)

    t0 = time.monotonic()
    make_certificate("late", issuer, privateKey=EC)
    notify_workers()
    wait_for(lambda: all_ready(1), IDLE_CAP, "the late certificate Ready", poll=0.2)
    # Without the NOTIFY the worker would look again only at its cap, IDLE_CAP after it
    # went idle: half of it tells the two apart, with room for a slow issuance.
    assert time.monotonic() - t0 < IDLE_CAP / 2


def test_once_drains_and_exits() -> None:
    issuer = make_selfsigned_issuer()
    for i in range(3):
        make_certificate(f"once-{i}", issuer, privateKey=EC)
    result = run("--once", "--threads", "2")
    assert result.returncode == 0, result.stderr
    assert all_ready(3)
    for cert in Certificate.objects.all():
        assert_issued_once(cert)


# A dead worker's rows must be claimable again within this long (its leases run out).
RESUME_LIMIT = 30.0
HAPPY_PATH = [c for c in faults.CHECKPOINTS if c != "after-failure-recorded"]


# A row a self-signed issuance leases: its model and primary key; parked, with its due_at.
Leased = type[Certificate] | type[CertificateRequest]
Row = tuple[Leased, int]
Parked = tuple[Leased, int, datetime | None]


def rows_of(name: str) -> list[Row]:
    """The Certificate and its requests (the rows a self-signed issuance goes through)."""
    cert = Certificate.objects.get(name=name)
    pks = CertificateRequest.objects.filter(certificate=cert).values_list("pk", flat=True)
    return [(Certificate, cert.pk), *((CertificateRequest, pk) for pk in pks)]


def park(name: str) -> list[Parked]:
    """Make the certificate's rows not due (remembering when they were), so the next
    crashing worker dies at its own checkpoint on its own certificate. The rows the dead
    worker holds too: on a loaded machine the loop outlasts the default lease, and a row
    whose lease ran out would be claimed (and crashed on) by the next `--once` worker. Their
    leases are kept, so they are claimable again only when those run out."""
    parked: list[Parked] = []
    for model, pk in rows_of(name):
        row = model.objects.filter(pk=pk).exclude(due_at=None).first()
        if row is not None:
            parked.append((model, pk, row.due_at))
            model.objects.filter(pk=pk).update(due_at=None)
    return parked


def running_since(proc: subprocess.Popen[str], timeout: float) -> float:
    """When the worker said it was running (monotonic): its first line of output."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, f"the worker did not start within {timeout} s"
    line = proc.stdout.readline()
    assert " running " in line, line
    return time.monotonic()


def ready_times(names: list[str], timeout: float) -> dict[str, float]:
    """Poll until every certificate is Ready; when each became Ready (monotonic)."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seen) < len(names) and time.monotonic() < deadline:
        for name in Certificate.objects.filter(
            name__in=names, state=CertificateState.READY
        ).values_list("name", flat=True):
            seen.setdefault(name, time.monotonic())
        time.sleep(0.2)
    return seen


def test_sigkill_at_each_checkpoint_a_live_worker_resumes_within_30_s(
    procs: list[subprocess.Popen[str]],
) -> None:
    """A real death (SIGKILL) at every checkpoint of an issuance, with the default lease;
    a worker that is running finishes each one within RESUME_LIMIT of the kill (or of its
    start, for a kill that came before it ran)."""
    issuer = make_selfsigned_issuer()
    killed_at: dict[str, float] = {}
    parked: list[Parked] = []
    for checkpoint in HAPPY_PATH:
        name = f"cp-{checkpoint}"
        make_certificate(name, issuer, privateKey=EC)
        result = run(
            "--once", "--threads", "1", ISSUANCE_CRASH_AT=checkpoint, ISSUANCE_CRASH_MODE="kill"
        )
        killed_at[name] = time.monotonic()
        assert result.returncode == -signal.SIGKILL, (checkpoint, result.stderr[-2000:])
        held = [
            m.objects.filter(pk=pk).values_list("lease_owner", flat=True)[0]
            for m, pk in rows_of(name)
        ]
        assert any(held), f"{checkpoint}: the dead worker should hold a row"
        parked += park(name)
    for model, pk, due_at in parked:  # due again, as they were when their worker died
        model.objects.filter(pk=pk).update(due_at=due_at)

    survivor = start("--threads", "4")
    procs.append(survivor)
    running = running_since(survivor, timeout=60)
    ready = ready_times(list(killed_at), timeout=RESUME_LIMIT + 30)
    assert set(ready) == set(killed_at), f"not Ready: {set(killed_at) - set(ready)}"
    # The clock starts at the kill or, for a kill before the survivor was running (all of
    # them here: each crash needs its own `--once` run first), when it was: a worker
    # cannot resume anything before it runs. The rows killed last still hold most of
    # their 20 s lease then, so the limit still checks the default lease.
    waits = {name: ready[name] - max(killed_at[name], running) for name in killed_at}
    print("kill -> Ready per checkpoint:", {k: round(v, 1) for k, v in waits.items()})
    print("survivor running after the last kill:", round(running - max(killed_at.values()), 1))
    assert max(waits.values()) <= RESUME_LIMIT, waits
    for cert in Certificate.objects.all():
        assert_issued_once(cert)


def test_one_of_two_workers_killed_the_other_resumes_its_rows_within_30_s(
    procs: list[subprocess.Popen[str]],
) -> None:
    issuer = make_selfsigned_issuer()
    n = 30
    for i in range(n):
        make_certificate(f"mid-{i:02d}", issuer, privateKey=EC)
    # One dies by SIGKILL in the middle of an issuance (right after it signed one). It starts
    # first: started second on a busy machine, it found the survivor had signed everything
    # and never reached its crash point.
    doomed = start(
        "--threads",
        "4",
        "--worker-id",
        "doomed",
        ISSUANCE_CRASH_AT="after-signed",
        ISSUANCE_CRASH_MODE="kill",
    )
    procs.append(doomed)
    survivor = start("--threads", "4", "--worker-id", "survivor")
    procs.append(survivor)
    assert doomed.wait(60) == -signal.SIGKILL
    killed = time.monotonic()
    held = [
        (model, pk)
        for model in (Certificate, CertificateRequest)
        for pk in model.objects.filter(lease_owner="doomed").values_list("pk", flat=True)
    ]
    assert held, "the dead worker should hold at least the request it was signing"
    wait_for(
        lambda: not any(m.objects.filter(pk=pk, lease_owner="doomed").exists() for m, pk in held),
        RESUME_LIMIT + 15,
        "the dead worker's rows taken over",
        poll=0.2,
    )
    resumed = time.monotonic() - killed
    print(f"{len(held)} row(s) of the dead worker taken over after {resumed:.1f} s")
    assert resumed <= RESUME_LIMIT
    wait_for(lambda: all_ready(n), 60, "every certificate Ready", poll=0.2)
    assert survivor.poll() is None
    for cert in Certificate.objects.all():
        assert_issued_once(cert)


def test_two_workers_never_reconcile_the_same_object_at_once(
    procs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    trace = tmp_path / "trace.log"
    for name in ("a", "b"):
        procs.append(
            start("--threads", "4", "--worker-id", name, ISSUANCE_RECONCILE_TRACE=str(trace))
        )
    # Both workers are up and idle before there is any work: on a loaded machine a worker
    # started first could otherwise finish all of it while the other is still importing
    # Django, and the test would prove nothing about two workers.
    for proc in procs:
        assert proc.stdout is not None
        assert "running" in proc.stdout.readline()
    issuer = make_selfsigned_issuer()
    n = 40
    for i in range(n):
        make_certificate(f"two-{i:02d}", issuer, privateKey=EC)
    wait_for(lambda: all_ready(n), 120, "every certificate Ready", poll=0.2)
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
