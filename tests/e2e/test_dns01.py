"""DNS-01 end to end: Pebble validating against a real BIND9 that we update.

RFC 2136 with TSIG (hmac-sha256) for a single name and for a wildcard plus its base name
(two challenges for one record name, serialised by the scheduler), and the webhook
provider against a local HTTP endpoint that itself sends the RFC 2136 update. Each test
checks the chain against Pebble's root and that the TXT records are gone afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from django.db import transaction
from pytest_django import Settings

from issuance.models import Certificate, Challenge, Event, Order, Secret
from issuance.pki.x509 import split_pem_chain
from issuance.specs.secret_refs import OPAQUE, SecretWrite, store
from tests.e2e.bind9 import Bind9Server, bind9_server, start_webhook_provider
from tests.e2e.conftest import AcmeStack, Drive
from tests.e2e.servers import verify_chain
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

ECDSA = {"algorithm": "ECDSA", "size": 256}


@pytest.fixture(scope="module")
def bind(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bind9Server]:
    with bind9_server(Path(tmp_path_factory.mktemp("bind-e2e"))) as server:
        yield server


def rfc2136_solver(bind: Bind9Server) -> dict[str, Any]:
    with transaction.atomic():  # store() locks the row
        store(SecretWrite(name="bind-tsig", path="test", type=OPAQUE, data={"secret": bind.secret}))
    return {
        "dns01": {
            "rfc2136": {
                "nameserver": bind.address,
                "tsigKeyName": bind.key_name,
                "tsigAlgorithm": "HMACSHA256",
                "tsigSecretSecretRef": {"name": "bind-tsig", "key": "secret"},
            }
        }
    }


def dns_stack(
    acme_stack: Callable[..., AcmeStack], bind: Bind9Server, settings: Settings
) -> AcmeStack:
    stack = acme_stack(dns_server=bind.address, serve_http01=False)
    # Our self-check asks BIND too (its NS records say port 53; it listens elsewhere).
    settings.SELF_CHECK_NAMESERVERS = [bind.address]
    return stack


def done(name: str) -> Callable[[], bool]:
    """Ready, and every challenge of it cleaned up."""

    def check() -> bool:
        cert = Certificate.objects.get(name=name)
        chals = Challenge.objects.filter(order__request__certificate=cert)
        return cert.condition_is("Ready") and all(c.finished and not c.presented for c in chals)

    return check


def assert_issued(stack: AcmeStack, name: str, dns_names: list[str]) -> list[Challenge]:
    cert = Certificate.objects.get(name=name)
    chain = Secret.objects.get(name=cert.secret_name).tls_crt
    verify_chain(chain, stack.pebble.roots())
    leaf = x509.load_pem_x509_certificate(split_pem_chain(chain)[0].encode())
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sorted(sans.get_values_for_type(x509.DNSName)) == sorted(dns_names)
    order = Order.objects.get(request__certificate=cert)
    assert order.state == "valid"
    challenges = list(Challenge.objects.filter(order=order))
    assert {c.type for c in challenges} == {"dns-01"}
    assert {c.state for c in challenges} == {"valid"}
    assert all(c.finished and not c.processing and not c.presented for c in challenges)
    for chal in challenges:
        assert Event.objects.filter(name=chal.name, reason="Presented").exists()
        assert Event.objects.filter(name=chal.name, reason="CleanedUp").exists()
    return challenges


def test_dns01_rfc2136_single_name(
    acme_stack: Callable[..., AcmeStack], bind: Bind9Server, drive: Drive, settings: Settings
) -> None:
    stack = dns_stack(acme_stack, bind, settings)
    issuer = stack.make_issuer("bind", solvers=[rfc2136_solver(bind)])
    make_certificate("dns-one", issuer, dnsNames=["one.example.test"], privateKey=ECDSA)
    drive(done("dns-one"), timeout=120)
    [chal] = assert_issued(stack, "dns-one", ["one.example.test"])
    assert chal.presented_at is not None
    assert bind.txt("_acme-challenge.one.example.test") == []


def test_dns01_rfc2136_wildcard_and_base_name(
    acme_stack: Callable[..., AcmeStack], bind: Bind9Server, drive: Drive, settings: Settings
) -> None:
    stack = dns_stack(acme_stack, bind, settings)
    issuer = stack.make_issuer("bind-wild", solvers=[rfc2136_solver(bind)])
    names = ["*.example.test", "example.test"]
    make_certificate("dns-wild", issuer, dnsNames=names, privateKey=ECDSA)
    drive(done("dns-wild"), timeout=150)
    challenges = assert_issued(stack, "dns-wild", names)
    # Two authorizations, one record name: both challenges are for dnsName example.test.
    assert sorted((c.dns_name, bool(c.spec.get("wildcard"))) for c in challenges) == [
        ("example.test", False),
        ("example.test", True),
    ]

    # The scheduler ran them one after the other (same dnsName and type).
    def scheduled(c: Challenge) -> datetime:
        assert c.scheduled_at is not None, f"{c.name} never scheduled"
        return c.scheduled_at

    first, second = sorted(challenges, key=scheduled)
    first_valid = Event.objects.get(name=first.name, reason="Valid").created_at
    assert scheduled(second) >= first_valid
    assert bind.txt("_acme-challenge.example.test") == []


def test_dns01_webhook_provider(
    acme_stack: Callable[..., AcmeStack], bind: Bind9Server, drive: Drive, settings: Settings
) -> None:
    stack = dns_stack(acme_stack, bind, settings)
    provider = start_webhook_provider(bind)
    try:
        issuer = stack.make_issuer("hook", solvers=[{"dns01": {"webhook": {"url": provider.url}}}])
        make_certificate("dns-hook", issuer, dnsNames=["hook.example.org"], privateKey=ECDSA)
        drive(done("dns-hook"), timeout=120)
        [chal] = assert_issued(stack, "dns-hook", ["hook.example.org"])
        actions = [c["action"] for c in provider.calls]
        assert actions[0] == "present" and actions[-1] == "cleanup"
        assert {c["fqdn"] for c in provider.calls} == {"_acme-challenge.hook.example.org."}
        assert {c["value"] for c in provider.calls} == {chal.spec["key"]}
        assert bind.txt("_acme-challenge.hook.example.org") == []
    finally:
        provider.stop()


def test_dns01_webhook_in_cert_manager_form_through_the_mapping(
    acme_stack: Callable[..., AcmeStack],
    bind: Bind9Server,
    drive: Drive,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cert-manager's `webhook {groupName, solverName, config}` (no url) runs once
    ACME_WEBHOOK_SOLVERS maps it to a URL; the endpoint gets cert-manager's fields too."""
    stack = dns_stack(acme_stack, bind, settings)
    provider = start_webhook_provider(bind)
    try:
        monkeypatch.setenv("ACME_WEBHOOK_SOLVERS", f"acme.example.org/bind9={provider.url}")
        block = {"groupName": "acme.example.org", "solverName": "bind9", "config": {"ttl": 60}}
        issuer = stack.make_issuer("hook-cm", solvers=[{"dns01": {"webhook": block}}])
        make_certificate("dns-hook-cm", issuer, dnsNames=["cm.example.org"], privateKey=ECDSA)
        drive(done("dns-hook-cm"), timeout=120)
        assert_issued(stack, "dns-hook-cm", ["cm.example.org"])
        assert provider.calls, "the mapped URL was never called"
        for call in provider.calls:
            assert (call["groupName"], call["solverName"], call["config"]) == (
                "acme.example.org",
                "bind9",
                {"ttl": 60},
            )
        assert bind.txt("_acme-challenge.cm.example.org") == []
    finally:
        provider.stop()
