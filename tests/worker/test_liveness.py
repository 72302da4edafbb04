"""`reconcile --check`: a running worker's beats (issuance/worker/liveness.py) make it pass;
no worker, a stale beat or an unreachable database make it fail, saying why."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from issuance.models import WorkerBeat
from issuance.worker.liveness import LivenessBeat
from issuance.worker.loop import Worker
from tests.helpers import wait_for
from tests.worker.threads import run_in_thread


def _check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    try:
        call_command("reconcile", "--check", *args)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, (out.out + out.err).strip()


@pytest.mark.django_db
def test_no_worker_fails_the_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert _check(capsys) == (1, "no worker is running: no worker beat recorded")


@pytest.mark.django_db
def test_a_recent_beat_passes_and_a_stale_one_fails(capsys: pytest.CaptureFixture[str]) -> None:
    beat = LivenessBeat("host-1-abc")
    assert beat.beat()
    code, text = _check(capsys)
    assert code == 0 and text.startswith("ok: worker host-1-abc (host ")
    WorkerBeat.objects.update(beat_at=timezone.now() - timedelta(seconds=95))
    code, text = _check(capsys)
    assert code == 1
    assert text.startswith("no worker beat in the last 30 s: the newest is worker host-1-abc")
    assert text.endswith(", 95 s ago")
    assert _check(capsys, "--max-age", "120")[0] == 0


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_running_worker_passes_and_its_clean_stop_removes_its_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    worker = Worker(threads=1)
    stop = threading.Event()
    thread = run_in_thread(worker, stop)
    try:
        wait_for(
            lambda: WorkerBeat.objects.filter(worker_id=worker.worker_id).exists(),
            10,
            "the worker's first beat",
        )
        code, text = _check(capsys)
        assert code == 0 and f"worker {worker.worker_id} " in text
    finally:
        stop.set()
        worker.stop()
        thread.join(10)
    assert not thread.is_alive()
    assert not WorkerBeat.objects.filter(worker_id=worker.worker_id).exists()
    assert _check(capsys)[0] == 1
