"""The challenges controller picks up where a crashed worker left off (Pebble + BIND9).

The scheduler cap is 0 while the order creates its challenge, so nothing starts; the test
then puts the challenge (and the CA) into the state a crash would leave, lifts the cap and
lets the real worker finish. Each must end valid, with one ACME order and the TXT removed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import transaction
from django.utils import timezone
from pytest_django import Settings

from issuance.acme.accounts import client_for
from issuance.acme.solvers.registry import solver_for
from issuance.controllers.challenges import SYNC_IF_QUEUED_FOR
from issuance.models import Certificate, Challenge, Event
from issuance.observability.metrics import REGISTRY
from issuance.specs.secret_refs import OPAQUE, SecretWrite, store
from tests.e2e.bind9 import Bind9Server, bind9_server
from tests.e2e.conftest import AcmeStack, Drive
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ECDSA = {"algorithm": "ECDSA", "size": 256}


@pytest.fixture(scope="module")
def bind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bind9Server]:
    with bind9_server(Path(tmp_path_factory.mktemp("bind-recovery"))) as server:
        yield server


@pytest.fixture
def queued_challenge(
    acme_stack: Callable[..., AcmeStack], bind: Bind9Server, drive: Drive, settings: Settings
) -> Callable[[str], Challenge]:
    def make(name: str) -> Challenge:
        stack = acme_stack(dns_server=bind.address, serve_http01=False)
        settings.SELF_CHECK_NAMESERVERS = [bind.address]
        settings.MAX_CONCURRENT_CHALLENGES = 0  # nothing is scheduled yet
        with transaction.atomic():
            store(SecretWrite(name="tsig", path="t", type=OPAQUE, data={"secret": bind.secret}))
        solver = {
            "dns01": {
                "rfc2136": {
                    "nameserver": bind.address,
                    "tsigKeyName": bind.key_name,
                    "tsigAlgorithm": "HMACSHA256",
                    "tsigSecretSecretRef": {"name": "tsig", "key": "secret"},
                }
            }
        }
        issuer = stack.make_issuer("pebble", solvers=[solver])
        make_certificate(name, issuer, dnsNames=[f"{name}.example.test"], privateKey=ECDSA)
        drive(lambda: Challenge.objects.filter(dns_name=f"{name}.example.test").exists(), 60)
        chal = Challenge.objects.get(dns_name=f"{name}.example.test")
        # queued, and "pending" as the authorization the order had just read said
        assert not chal.processing and chal.state == "pending"
        return chal

    return make


def wait_authz_valid(chal: Challenge) -> None:
    client = client_for(chal.issuer)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if client.get_authorization(chal.authorization_url)["status"] == "valid":
            return
        time.sleep(0.2)
    raise AssertionError("authorization did not become valid")


def finish_with_worker(chal: Challenge, drive: Drive, settings: Settings) -> Challenge:
    settings.MAX_CONCURRENT_CHALLENGES = 60
    certificate = chal.order.request.certificate
    assert certificate is not None
    cert_name = certificate.name

    def done() -> bool:
        c = Challenge.objects.get(pk=chal.pk)
        return (
            Certificate.objects.get(name=cert_name).condition_is("Ready")
            and c.finished
            and not c.presented
        )

    drive(done, timeout=90)
    chal.refresh_from_db()
    assert chal.state == "valid", chal.reason
    assert client_for(chal.issuer).list_orders() == [chal.order.url]
    return chal


def crash_state(chal: Challenge, accepted: str) -> None:
    """What the row looks like after "accepting" was stored and before the answer returned."""
    chal.set_condition("Accepted", accepted, "Accepting", "self check passed")
    Challenge.objects.filter(pk=chal.pk).update(
        processing=True,
        scheduled_at=timezone.now(),
        state="processing",
        presented=True,
        presented_at=timezone.now(),
        conditions=chal.conditions,
        due_at=timezone.now(),  # a crashed worker's row stays due (its lease just expires)
    )


def acme_calls(action: str) -> float:
    labels = {"action": action, "result": "ok"}
    return REGISTRY.get_sample_value("issuance_acme_requests_total", labels) or 0.0


def test_fresh_pending_challenge_is_presented_without_asking_the_ca_first(
    queued_challenge: Callable[[str], Challenge],
    bind: Bind9Server,
    drive: Drive,
    settings: Settings,
) -> None:
    chal = queued_challenge("fresh")
    before = acme_calls("get_challenge")
    chal = finish_with_worker(chal, drive, settings)
    assert acme_calls("get_challenge") == before
    assert Event.objects.filter(name=chal.name, reason="Presented").count() == 1
    assert Event.objects.filter(name=chal.name, reason="Accepted").count() == 1


def test_already_valid_at_the_ca_is_not_presented_again(
    queued_challenge: Callable[[str], Challenge],
    bind: Bind9Server,
    drive: Drive,
    settings: Settings,
) -> None:
    chal = queued_challenge("synced")
    # Someone (an earlier run) presented and answered it; the CA validated it while ours
    # waited in the queue, long enough that its "pending" is no longer trusted.
    solver_for(chal).present(chal)
    client_for(chal.issuer).answer_challenge(chal.spec["url"])
    wait_authz_valid(chal)
    solver_for(chal).cleanup(chal)
    queued_since = timezone.now() - SYNC_IF_QUEUED_FOR - timedelta(seconds=1)
    Challenge.objects.filter(pk=chal.pk).update(created_at=queued_since)
    before = acme_calls("get_challenge")
    chal = finish_with_worker(chal, drive, settings)
    assert acme_calls("get_challenge") == before + 1
    assert not Event.objects.filter(name=chal.name, reason="Presented").exists()
    assert not Event.objects.filter(name=chal.name, reason="Accepted").exists()
    assert Event.objects.filter(name=chal.name, reason="Valid").exists()


def test_long_queued_and_still_pending_is_read_once_then_presented(
    queued_challenge: Callable[[str], Challenge],
    bind: Bind9Server,
    drive: Drive,
    settings: Settings,
) -> None:
    chal = queued_challenge("waited")
    queued_since = timezone.now() - SYNC_IF_QUEUED_FOR - timedelta(seconds=1)
    Challenge.objects.filter(pk=chal.pk).update(created_at=queued_since, updated_at=queued_since)
    before = acme_calls("get_challenge")
    chal = finish_with_worker(chal, drive, settings)
    # One look at the CA (still pending there), then the usual steps: never a loop of looks.
    assert acme_calls("get_challenge") == before + 1
    assert Event.objects.filter(name=chal.name, reason="Presented").count() == 1
    assert Event.objects.filter(name=chal.name, reason="Valid").exists()


def test_crash_after_the_answer_reached_the_ca(
    queued_challenge: Callable[[str], Challenge],
    bind: Bind9Server,
    drive: Drive,
    settings: Settings,
) -> None:
    chal = queued_challenge("answered")
    solver_for(chal).present(chal)
    client_for(chal.issuer).answer_challenge(chal.spec["url"])  # the answer that got through
    crash_state(chal, "Unknown")
    chal = finish_with_worker(chal, drive, settings)
    # Answered again (harmless) or refused and then polled: either way it ends valid.
    assert bind.txt("_acme-challenge.answered.example.test") == []


def test_crash_before_the_answer_was_sent(
    queued_challenge: Callable[[str], Challenge],
    bind: Bind9Server,
    drive: Drive,
    settings: Settings,
) -> None:
    chal = queued_challenge("unsent")
    solver_for(chal).present(chal)
    crash_state(chal, "Unknown")
    chal = finish_with_worker(chal, drive, settings)
    assert Event.objects.filter(name=chal.name, reason="Accepted").count() == 1
    assert bind.txt("_acme-challenge.unsent.example.test") == []
