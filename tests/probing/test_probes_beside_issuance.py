"""Probing never delays issuance: while every probe thread waits on a server that never
answers (each for the full 5 s timeout), a running worker issues a new certificate at once,
and the hanging probes still end as timeouts."""

from __future__ import annotations

import contextlib
import threading
import time

import pytest
from django.conf import settings
from django.utils import timezone

from issuance.models import Certificate, Endpoint
from issuance.probing import runner
from issuance.probing.handshake import PROBE_TIMEOUT
from issuance.worker.loop import Worker
from issuance.worker.wakeup import wake
from tests.factories import make_certificate
from tests.helpers import wait_for
from tests.probing.conftest import Issued
from tests.probing.servers import black_hole
from tests.worker.threads import run_in_thread


# Probe threads and reconcile threads writing at once: SQLite's shared in-memory test
# database locks whole tables instead of waiting (the file database in use waits).
@pytest.mark.postgres
def test_issuance_is_not_held_up_by_hanging_probes(issued_committed: Issued) -> None:
    issued = issued_committed
    with contextlib.ExitStack() as stack:
        ports = [stack.enter_context(black_hole()) for _ in range(settings.PROBE_CONCURRENCY + 5)]
        endpoints = [issued.endpoint(port) for port in ports]
        stop = threading.Event()
        worker = Worker(threads=4)
        thread = run_in_thread(worker, stop)
        try:
            # Every probe thread is busy on a server that never answers.
            wait_for(
                lambda: runner.in_flight() >= settings.PROBE_CONCURRENCY,
                timeout=10,
                what="the probe pool filled",
            )
            started = time.monotonic()
            # Made as the API makes it: the row, then the wake-up that tells the workers.
            wake(make_certificate("api", issued.issuer, dnsNames=["api.example.test"]))
            wait_for(
                lambda: Certificate.objects.filter(name="api", revision=1).exists(),
                timeout=PROBE_TIMEOUT,
                what="issued while the probes hang",
            )
            took = time.monotonic() - started
            # Before the first probe could even time out.
            assert took < PROBE_TIMEOUT - 1, took
            assert runner.in_flight() > 0  # the probes were still waiting meanwhile
            wait_for(
                lambda: (
                    Endpoint.objects.filter(pk__in=[e.pk for e in endpoints], match="error").count()
                    == len(endpoints)
                ),
                timeout=4 * PROBE_TIMEOUT,
                what="every probe ended",
            )
        finally:
            stop.set()
            thread.join(30)
    records = [e.typed_last_probe for e in Endpoint.objects.all()]
    kinds = {r["errorKind"] if r else "" for r in records}
    assert kinds == {"timeout"}
    assert all(e.next_probe_at > timezone.now() for e in Endpoint.objects.all())
