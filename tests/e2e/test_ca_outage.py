"""The ACME CA goes away while certificates are being issued, then comes back.

Real Pebble (and its DNS, and the app answering HTTP-01), the real worker with its default
threads running in this process (so the client's per-CA request counter can be read), all
defaults. Two ways a CA goes away:

- it freezes: Pebble stopped with SIGSTOP. Connections are still accepted by the kernel,
  nothing is answered; calls end at the client's read timeout. SIGCONT brings it back
  with its state.
- it refuses: a TCP forwarder in front of Pebble closes its port (and cuts open
  connections), then listens again on the same port. A killed Pebble would come back with
  no accounts and no orders (it keeps them in memory), which is another failure (a CA that
  lost its data), so the forwarder stands in for "the CA's host is down".

Each test checks what the issue asks: the issuer (API and page), its certificates (page
and list) and the dashboard say CAUnreachable with the error and since when within 15 s of
the first failed call; the requests sent to the CA during the outage stay within what one
probe at a time allows; after the CA is back every certificate is Ready within 60 s, with
one Order per request, no order failed and no certificate in the issuance backoff.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from datetime import datetime

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from issuance.acme import health
from issuance.acme.accounts import client_for
from issuance.acme.protocol.exchange import server_stats
from issuance.models import AcmeServer, Certificate, CertificateRequest, Event, Issuer, Order
from issuance.worker.wakeup import notify_workers
from tests.e2e.background import (
    ECDSA,
    all_ready,
    make_viewer,
    outage_record,
    running_worker,
    warm_up,
)
from tests.e2e.conftest import AcmeStack
from tests.e2e.tcpproxy import TcpProxy
from tests.factories import make_certificate
from tests.helpers import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

CERTIFICATES = 12
SHOWN_WITHIN = 15.0  # seconds from the first failed call
READY_WITHIN = 60.0  # seconds from the CA's return


def sent(url: str) -> int:
    """Requests the client sent to this CA so far (this process's per-CA counter)."""
    return sum(server_stats(url).values())


def max_requests(threads: int, seconds: float) -> int:
    """What one probe at a time allows: a request per worker thread sent before the CA was
    known unreachable (each waits for its own timeout), then one probe per interval."""
    probes, elapsed = 1, 0.0
    while True:
        elapsed += health.probe_interval(probes - 1).total_seconds()
        if elapsed > seconds:
            return threads + probes
        probes += 1


class Views:
    """What an operator looks at, read the way a browser and an API client would."""

    def __init__(self, viewer: User, issuer: Issuer, certificates: list[str]) -> None:
        self.web = Client()
        self.web.force_login(viewer)
        self.issuer = issuer
        self.certificates = certificates

    def show_outage(self, errors: tuple[str, ...]) -> bool:
        health.forget()  # no cached view: each look reads the database, as a new process
        issuer = Issuer.objects.get(pk=self.issuer.pk)
        ready = issuer.get_condition("Ready")
        if (
            ready is None
            or ready["reason"] != "CAUnreachable"
            or not _has(ready["message"], errors)
        ):
            return False
        api = self.web.get(f"/api/v1/issuers/{issuer.name}/").json()["status"]["ca"]
        if api["reachable"] or not _has(api["lastError"], errors):
            return False
        pages = [
            "/",
            "/issuers/",
            "/certificates/",
            *[f"/certificates/{name}/" for name in self.certificates[:3]],
        ]
        bodies = [self.web.get(p).content.decode() for p in pages]
        return all("ca-unreachable" in body and _has(body, errors) for body in bodies)

    def show_no_outage(self) -> bool:
        health.forget()
        pages = ["/", "/issuers/", *[f"/certificates/{n}/" for n in self.certificates[:3]]]
        return not any("ca-unreachable" in self.web.get(p).content.decode() for p in pages)


def _has(text: str, parts: tuple[str, ...]) -> bool:
    return any(part in text for part in parts)


def create_certificates(issuer: Issuer, prefix: str) -> list[str]:
    names = [f"{prefix}-{i}" for i in range(CERTIFICATES)]
    for name in names:
        make_certificate(name, issuer, dnsNames=[f"{name}.example.test"], privateKey=ECDSA)
    notify_workers()
    return names


def check_issued_once_without_failures(issuer: Issuer, names: list[str]) -> None:
    """One request and one Order per certificate, none failed, no issuance backoff; at the
    CA too, one order per certificate (a timed-out newOrder was recovered, not repeated)."""
    certs = Certificate.objects.filter(name__in=names)
    assert all(c.failed_issuance_attempts in (None, 0) for c in certs)
    assert all(c.next_retry_time is None and c.last_failure_time is None for c in certs)
    requests = CertificateRequest.objects.filter(certificate__name__in=names)
    assert requests.count() == len(names), "one request per certificate"
    orders = Order.objects.filter(request__certificate__name__in=names)
    assert orders.count() == len(names), "one Order per request"
    assert set(orders.values_list("state", flat=True)) == {"valid"}
    assert not orders.filter(failure_time__isnull=False).exists()
    issuer.refresh_from_db()
    at_ca = client_for(issuer).list_orders()
    ours = set(orders.values_list("url", flat=True))
    assert ours <= set(at_ca)
    assert len(at_ca) == len(ours) + 1, "one order at the CA per request (+ the warm-up one)"


def outage_events(issuer: Issuer) -> tuple[int, int]:
    entries = Event.objects.filter(kind="Issuer", name=issuer.name)
    return (
        entries.filter(reason="CAUnreachable").count(),
        entries.filter(reason="CAReachable").count(),
    )


@pytest.fixture
def viewer(transactional_db: None) -> User:
    return make_viewer()


def run_outage(
    issuer: Issuer,
    url: str,
    viewer: User,
    *,
    prefix: str,
    go_down: Callable[[], None],
    come_back: Callable[[], None],
    outage_seconds: float,
    errors: tuple[str, ...],
) -> dict[str, float]:
    threads: int = django_settings.WORKER_THREADS
    with running_worker():
        warm_up(issuer, f"{prefix}-warm")
        names = create_certificates(issuer, prefix)
        # Down while the certificates are in flight (as soon as the first order exists).
        wait_for(
            lambda: (
                Order.objects.filter(request__certificate__name__in=names).exclude(url="").exists()
            ),
            30,
            "a first ACME order",
            poll=0.01,
        )
        sent_before = sent(url)
        go_down()
        down_at = time.monotonic()
        pending = list(Certificate.objects.filter(name__in=names).exclude(state="Ready"))
        assert pending, "some certificates are still being issued when the CA goes away"

        record = wait_for(lambda: outage_record(url), 45, "the CA recorded unreachable")
        assert record.unreachable_since is not None
        first_failure: datetime = record.unreachable_since
        views = Views(viewer, issuer, [c.name for c in pending])
        wait_for(lambda: views.show_outage(errors), 30, "the outage shown everywhere")
        shown = (timezone.now() - first_failure).total_seconds()
        assert shown <= SHOWN_WITHIN, f"shown {shown:.1f}s after the first failed call"

        time.sleep(max(0.0, outage_seconds - (time.monotonic() - down_at)))
        during = sent(url) - sent_before
        failed = AcmeServer.objects.get(directory_url=url).failed_requests
        allowed = max_requests(threads, time.monotonic() - down_at)
        assert failed <= during <= allowed, (failed, during, allowed)
        come_back()
        back_at = time.monotonic()
        wait_for(lambda: all_ready(names), READY_WITHIN, "every certificate Ready", poll=0.2)
        ready_after = time.monotonic() - back_at
        wait_for(views.show_no_outage, 10, "the outage gone from the pages")
    assert outage_record(url) is None
    check_issued_once_without_failures(issuer, names)
    assert outage_events(issuer) == (1, 1), "one entry when it went away, one when it came back"
    return {
        "shown_after_first_failure": shown,
        "requests_during_outage": during,
        "failed_requests": failed,
        "ready_after_return": ready_after,
    }


def test_frozen_ca_sigstop(acme_stack: Callable[..., AcmeStack], viewer: User) -> None:
    stack = acme_stack()
    issuer = stack.make_issuer()
    pid = stack.pebble.process.popen.pid
    try:
        result = run_outage(
            issuer,
            stack.pebble.directory_url,
            viewer,
            prefix="frozen",
            go_down=lambda: os.kill(pid, signal.SIGSTOP),
            come_back=lambda: os.kill(pid, signal.SIGCONT),
            outage_seconds=60,
            errors=("no answer within",),
        )
    finally:
        os.kill(pid, signal.SIGCONT)
    print("frozen CA:", result)


def test_refusing_ca_port_closed(acme_stack: Callable[..., AcmeStack], viewer: User) -> None:
    stack = acme_stack()
    proxy = TcpProxy(("127.0.0.1", stack.pebble.port))
    try:
        url = f"https://127.0.0.1:{proxy.port}/dir"
        issuer = stack.make_issuer(server=url)
        result = run_outage(
            issuer,
            url,
            viewer,
            prefix="refused",
            go_down=proxy.down,
            come_back=proxy.up,
            outage_seconds=35,
            errors=("connection refused", "connection reset", "closed connection"),
        )
    finally:
        proxy.stop()
    print("refusing CA:", result)
