"""The embedded default: a real `manage.py reconcile` with threads on a SQLite file (WAL).

Another process adds certificates while the worker sleeps; the worker notices the commit
(PRAGMA data_version), issues everything once, and stops cleanly on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
CREATE = """
from issuance.worker.wakeup import wake
from issuance.models import Issuer
from tests.factories import make_certificate, make_selfsigned_issuer
issuer = Issuer.objects.filter(name="selfsigned").first() or make_selfsigned_issuer()
for i in range({start}, {stop}):
    wake(make_certificate(f"file-{{i:02d}}", issuer, privateKey={{"algorithm": "ECDSA"}}))
"""


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    path = tmp_path / "embedded.sqlite3"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ISSUANCE_")}
    env.update(
        DATABASE_URL=f"sqlite:///{path}",
        KEY_ENCRYPTION_KEY=settings.KEY_ENCRYPTION_KEY,
        SECRET_KEY="test-only",
        PYTHONUNBUFFERED="1",
    )
    manage(env, "migrate", "-v0")
    yield path, env


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def query(path: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path, timeout=30)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def ready(path: Path) -> int:
    rows = query(path, "select count(*) from issuance_certificate where state = 'Ready'")
    count = rows[0][0]
    assert isinstance(count, int)
    return count


def test_threaded_worker_on_sqlite_file(sqlite_file: tuple[Path, dict[str, str]]) -> None:
    path, env = sqlite_file
    manage(env, "shell", "-c", CREATE.format(start=0, stop=10))
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "reconcile", "--threads", "4"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while ready(path) < 10 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ready(path) == 10
        time.sleep(1.0)  # idle now
        t0 = time.monotonic()
        manage(env, "shell", "-c", CREATE.format(start=10, stop=15))
        while ready(path) < 15 and time.monotonic() < t0 + 30:
            time.sleep(0.1)
        assert ready(path) == 15
        # noticed through data_version, not the 30 s safety cap (shell startup included)
        assert time.monotonic() - t0 < 15
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err[-2000:]
    assert "database is locked" not in err and "Traceback" not in err, err[-2000:]
    per_cert = query(
        path,
        "select certificate_id, count(*), max(revision) from issuance_certificaterequest "
        "group by certificate_id",
    )
    assert len(per_cert) == 15
    assert all(count == 1 and revision == 1 for _, count, revision in per_cert)
    leased = query(path, "select count(*) from issuance_certificate where lease_owner != ''")
    assert leased[0][0] == 0
