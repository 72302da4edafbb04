"""The DNS server the self-checks ask (SELF_CHECK_NAMESERVERS) is down, then back.

DNS-01: a real BIND9 holds the zone; the solver is a webhook that updates BIND9 and, right
after presenting, kills it, so the self-check that follows finds the server down (no
test knob holds the challenge back). HTTP-01: the self-check resolves the name through
pebble-challtestsrv, killed before the certificate is created. Each server is restarted
on the same port after two failed checks.

While down, the challenge's reason names the server and what happened, it is checked again
every SELF_CHECK_INTERVAL (the default, 10 s), and once the server is back it passes and
the certificate is issued. Defaults throughout: the interval and the self-check's DNS
timeout are not shortened.
"""

from __future__ import annotations

import html
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from pytest_django import Settings

from issuance.acme.solvers import selfcheck
from issuance.models import Certificate, Challenge
from issuance.worker.wakeup import notify_workers
from tests.e2e.background import make_viewer, running_worker
from tests.e2e.bind9 import NAMED, Bind9Server, WebhookProvider, start_bind9, start_webhook_provider
from tests.e2e.conftest import AcmeStack
from tests.e2e.servers import ChallTestSrv, start_challtestsrv, start_process
from tests.factories import make_certificate
from tests.helpers import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(240)]

ECDSA = {"algorithm": "ECDSA", "size": 256}
FAILED_CHECKS = 2


@dataclass
class Check:
    """One failed self-check as seen in the database: when it was recorded, and what."""

    seen: datetime
    attempts: int
    reason: str
    next_check_at: datetime | None


@dataclass
class Watch:
    """Polls a challenge and keeps every failed check it records."""

    name: str
    checks: list[Check] = field(default_factory=list)

    def poll(self) -> Challenge | None:
        chal = Challenge.objects.filter(dns_name=self.name).first()
        if chal is None:
            return None
        last = self.checks[-1].attempts if self.checks else 0
        if chal.attempts > last and chal.reason.startswith("self check failed"):
            self.checks.append(
                Check(timezone.now(), chal.attempts, chal.reason, chal.next_check_at)
            )
        return chal

    def failed(self, n: int) -> bool:
        self.poll()
        return len(self.checks) >= n

    def accepted(self) -> bool:
        chal = self.poll()
        return chal is not None and chal.state in ("processing", "valid")


def check_retries(watch: Watch, where: str) -> None:
    """Every failed check says which server did not answer, and the next one comes
    SELF_CHECK_INTERVAL after it (a check that waits on a dead server takes up to the
    self-check's DNS timeout)."""
    interval = django_settings.SELF_CHECK_INTERVAL.total_seconds()
    for check in watch.checks:
        assert where in check.reason, check.reason
        assert f"did not answer within {selfcheck.TIMEOUT:g}s" in check.reason, check.reason
        assert check.next_check_at is not None
        # Recorded within a poll of being written, with next_check_at = then + interval.
        ahead = (check.next_check_at - check.seen).total_seconds()
        assert interval - 1.5 <= ahead <= interval + 0.5, ahead
    for before, after in zip(watch.checks, watch.checks[1:], strict=False):
        gap = (after.seen - before.seen).total_seconds()
        assert interval - 1 <= gap <= interval + selfcheck.TIMEOUT + 3, gap


def check_shown(viewer: User, watch: Watch, certificate: str) -> None:
    """The reason is what the API, the challenges page and the certificate page show."""
    web = Client()
    web.force_login(viewer)
    chal = Challenge.objects.get(dns_name=watch.name)
    assert chal.reason == watch.checks[-1].reason, "the server is still down"
    api = web.get(f"/api/v1/challenges/{chal.name}/").json()["status"]
    assert api["reason"] == chal.reason
    assert api["attempts"] >= FAILED_CHECKS
    escaped = html.escape(chal.reason, quote=True)
    for page in ("/challenges/", f"/certificates/{certificate}/"):
        # <wbr>: line-break points in long values (the `breakable` filter), not text.
        assert escaped in web.get(page).content.decode().replace("<wbr>", ""), page


def wait_passes_after(watch: Watch, back_at: float) -> float:
    wait_for(watch.accepted, 60, "the self-check passes", poll=0.1)
    passed_after = time.monotonic() - back_at
    # At worst a check was waiting on the dead server when it came back: it times out,
    # then the next comes one interval later.
    interval = django_settings.SELF_CHECK_INTERVAL.total_seconds()
    assert passed_after <= interval + selfcheck.TIMEOUT + 5, passed_after
    return passed_after


# -- DNS-01: BIND9 killed right after presenting ------------------------------------------


def restart_bind9(bind: Bind9Server) -> None:
    """named again with the same configuration and port (its journal keeps the TXT)."""
    conf = bind.workdir / "named.conf"
    argv = [NAMED, "-g", "-4", "-n", "1", "-c", str(conf), "-p", str(bind.port)]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    bind.process = start_process("named", argv, bind.workdir, cwd=bind.workdir)
    wait_for(lambda: _serving(bind), 30, "BIND9 serving again")


def _serving(bind: Bind9Server) -> bool:
    try:
        return bool(bind.query(bind.zones[0], "SOA").answer)
    except Exception:  # not up yet
        return False


def start_killing_webhook(bind: Bind9Server) -> tuple[WebhookProvider, threading.Event]:
    """A webhook DNS provider that updates BIND9 and stops it (SIGKILL: down at once, as after
    a crash) right after the first record is in; the event is set then."""
    killed = threading.Event()

    def kill_after_first_present(action: str, status: int) -> None:
        if action == "present" and status == 200 and not killed.is_set():
            bind.process.kill()
            killed.set()

    return start_webhook_provider(bind, after=kill_after_first_present), killed


@pytest.fixture
def bind(tmp_path: Path) -> Iterator[Bind9Server]:
    server = start_bind9(tmp_path)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def viewer(transactional_db: None) -> User:
    return make_viewer()


def test_dns01_self_check_server_down_then_back(
    acme_stack: Callable[..., AcmeStack], bind: Bind9Server, settings: Settings, viewer: User
) -> None:
    stack = acme_stack(dns_server=bind.address, serve_http01=False)
    settings.SELF_CHECK_NAMESERVERS = [bind.address]
    webhook, killed = start_killing_webhook(bind)
    try:
        issuer = stack.make_issuer(solvers=[{"dns01": {"webhook": {"url": webhook.url}}}])
        watch = Watch("dns-down.example.test")
        with running_worker():
            make_certificate("dns-down", issuer, dnsNames=[watch.name], privateKey=ECDSA)
            notify_workers()
            wait_for(killed.is_set, 60, "presented (and BIND9 killed)")
            wait_for(lambda: watch.failed(FAILED_CHECKS), 60, "failed self-checks", poll=0.1)
            check_retries(watch, f"nameserver {bind.address}")
            check_shown(viewer, watch, "dns-down")
            restart_bind9(bind)
            passed_after = wait_passes_after(watch, time.monotonic())
            wait_for(lambda: Certificate.objects.get(name="dns-down").state == "Ready", 60, "Ready")
        chal = Challenge.objects.get(dns_name=watch.name)
        assert chal.state == "valid"
        print(f"DNS-01: passed {passed_after:.1f}s after BIND9 came back; checks {watch.checks}")
    finally:
        webhook.stop()


# -- HTTP-01: the resolver of the self-check killed before the certificate -----------------


def restart_challtestsrv(dns: ChallTestSrv, workdir: Path) -> None:
    """pebble-challtestsrv again on the same DNS and management ports."""
    again = start_challtestsrv(workdir, dns_port=dns.dns_port, management_port=dns.management_port)
    dns.process = again.process


def test_http01_self_check_resolver_down_then_back(
    acme_stack: Callable[..., AcmeStack], viewer: User
) -> None:
    stack = acme_stack()
    issuer = stack.make_issuer()
    watch = Watch("http-down.example.test")
    with running_worker():
        wait_for(lambda: type(issuer).objects.get(pk=issuer.pk).is_ready, 30, "issuer ready")
        stack.dns.process.kill()
        make_certificate("http-down", issuer, dnsNames=[watch.name], privateKey=ECDSA)
        notify_workers()
        wait_for(lambda: watch.failed(FAILED_CHECKS), 90, "failed self-checks", poll=0.1)
        check_retries(watch, f"nameserver {stack.dns.dns_address}")
        assert all(f"resolving {watch.name}" in c.reason for c in watch.checks)
        check_shown(viewer, watch, "http-down")
        restart_challtestsrv(stack.dns, stack.workdir)
        passed_after = wait_passes_after(watch, time.monotonic())
        wait_for(lambda: Certificate.objects.get(name="http-down").state == "Ready", 60, "Ready")
    print(f"HTTP-01: passed {passed_after:.1f}s after the DNS server came back")
