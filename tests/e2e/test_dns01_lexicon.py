"""DNS-01 through dns-lexicon's `powerdns` provider, end to end: Pebble validates against a
real PowerDNS (tests/e2e/powerdns.py) that the console updates over its HTTP API.

A wildcard certificate and a 3-name certificate issue; just before each cleanup the test
reads the TXT records from PowerDNS's API (so after the CA validated) and afterwards checks that exactly ours are gone
(an unrelated TXT value at a challenge name stays). With a wrong API key the DNS-01
preflight fails: the Certificate says DNSPreflightFailed and no Order (so no ACME order)
exists.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction

from issuance.acme.solvers import preflight_step
from issuance.acme.solvers.lexicon_dns import LexiconSolver
from issuance.models import Certificate, CertificateRequest, Challenge, Event, Order
from issuance.specs.secret_refs import OPAQUE, SecretWrite, store
from tests.e2e.conftest import AcmeStack
from tests.e2e.powerdns import PowerDnsServer, powerdns_server
from tests.e2e.test_dns01 import ECDSA, assert_issued, done
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def pdns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PowerDnsServer]:
    with powerdns_server(Path(tmp_path_factory.mktemp("pdns-e2e"))) as server:
        yield server


@pytest.fixture(autouse=True)
def _fresh_preflight_cache() -> Iterator[None]:
    preflight_step.forget_cache()
    yield
    preflight_step.forget_cache()


def lexicon_solver(pdns: PowerDnsServer, api_key: str, secret: str = "pdns-api") -> dict[str, Any]:
    with transaction.atomic():  # store() locks the row
        store(SecretWrite(name=secret, path="test", type=OPAQUE, data={"auth_token": api_key}))
    return {
        "dns01": {
            "lexicon": {
                "provider": "powerdns",
                "credentialsSecretRef": {"name": secret},
                "pdns_server": pdns.api_url,
            }
        }
    }


def pdns_stack(
    acme_stack: Callable[..., AcmeStack], pdns: PowerDnsServer, settings: Any
) -> AcmeStack:
    stack = acme_stack(dns_server=pdns.address, serve_http01=False)
    # Self-check and preflight ask PowerDNS too (its NS records say port 53).
    settings.SELF_CHECK_NAMESERVERS = [pdns.address]
    return stack


def pebble_log_count(stack: AcmeStack, text: str) -> int:
    """How many lines of Pebble's log contain `text`: its log is the CA's own record of every
    request it handled ("POST /order-plz -> calling handler()") and every order it created
    ("Added order ..."), unlike our Order rows, which only say what the console stored."""
    return sum(text in line for line in stack.pebble.process.log().splitlines())


NEW_ORDER_REQUEST = "/order-plz -> calling handler()"
ORDER_ADDED = "Added order "


def recording_cleanups(
    pdns: PowerDnsServer, monkeypatch: pytest.MonkeyPatch, seen: dict[str, set[str]]
) -> None:
    """Read each challenge's TXT values from PowerDNS just before the solver removes them.

    Cleanup runs after the CA validated, so this sees what PowerDNS served while the challenge
    ran. Reading between worker passes instead missed challenges whose whole life (presented,
    validated, cleaned up) fell inside one pass on a loaded machine.
    """
    real_cleanup = LexiconSolver.cleanup

    def cleanup(self: LexiconSolver, challenge: Challenge) -> None:
        fqdn = f"_acme-challenge.{challenge.dns_name}"
        seen.setdefault(challenge.key_authorization, set()).update(pdns.api_txt(fqdn))
        real_cleanup(self, challenge)

    monkeypatch.setattr(LexiconSolver, "cleanup", cleanup)


def test_wildcard_and_three_names_through_lexicon_powerdns(
    acme_stack: Callable[..., AcmeStack],
    pdns: PowerDnsServer,
    drive: Any,
    settings: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stack = pdns_stack(acme_stack, pdns, settings)
    issuer = stack.make_issuer("pdns", solvers=[lexicon_solver(pdns, pdns.api_key)])
    # Someone else's TXT value at one challenge name: cleanup must leave it.
    pdns.add_record("_acme-challenge.b.example.test", "TXT", '"not-ours"')

    seen: dict[str, set[str]] = {}
    recording_cleanups(pdns, monkeypatch, seen)
    make_certificate("lex-wild", issuer, dnsNames=["*.example.org"], privateKey=ECDSA)
    drive(done("lex-wild"), timeout=120)
    [wild] = assert_issued(stack, "lex-wild", ["*.example.org"])
    assert wild.spec["wildcard"] is True and wild.dns_name == "example.org"

    three = ["a.example.test", "b.example.test", "c.example.test"]
    make_certificate("lex-three", issuer, dnsNames=three, privateKey=ECDSA)
    drive(done("lex-three"), timeout=120)
    challenges = assert_issued(stack, "lex-three", three)

    # Every challenge's value was in PowerDNS while it ran, and is gone now.
    for chal in [wild, *challenges]:
        assert chal.key_authorization in seen.get(chal.key_authorization, set()), chal.dns_name
    assert pdns.api_txt("_acme-challenge.example.org") == []
    assert pdns.api_txt("_acme-challenge.a.example.test") == []
    assert pdns.api_txt("_acme-challenge.c.example.test") == []
    assert pdns.api_txt("_acme-challenge.b.example.test") == ["not-ours"]
    assert pdns.txt("_acme-challenge.b.example.test") == ["not-ours"]
    # Pebble's log counts the orders the CA made: one per Order row (what the negative test
    # below relies on to show that no newOrder reached the CA).
    orders = Order.objects.filter(request__certificate__name__in=["lex-wild", "lex-three"])
    assert orders.count() >= 2
    assert pebble_log_count(stack, ORDER_ADDED) == orders.count()
    # The preflight passed and said so on the issuer.
    issuer.refresh_from_db()
    assert issuer.condition_is(preflight_step.CONDITION)


def test_wrong_api_key_fails_the_preflight_and_spends_no_order(
    acme_stack: Callable[..., AcmeStack], pdns: PowerDnsServer, drive: Any, settings: Any
) -> None:
    stack = pdns_stack(acme_stack, pdns, settings)
    solver = lexicon_solver(pdns, "wrong-key", secret="pdns-bad")
    issuer = stack.make_issuer("pdns-bad", solvers=[solver])
    make_certificate("lex-bad", issuer, dnsNames=["bad.example.test"], privateKey=ECDSA)

    def preflight_failed() -> bool:
        cert = Certificate.objects.get(name="lex-bad")
        return cert.condition_is(preflight_step.CONDITION, "False")

    drive(preflight_failed, timeout=60)
    cert = Certificate.objects.get(name="lex-bad")
    cond = cert.get_condition(preflight_step.CONDITION)
    assert cond is not None
    assert cond["reason"] == "DNSPreflightFailed"
    assert "bad.example.test" in cond["message"]
    assert "HTTP 401" in cond["message"] and "bad credentials" in cond["message"]
    assert "wrong-key" not in cond["message"]
    request = CertificateRequest.objects.get(certificate=cert)
    ready = request.get_condition("Ready")
    assert ready is not None
    assert ready["reason"] == "DNSPreflightFailed"
    assert ready["message"].startswith("DNSPreflightFailed: bad.example.test:")
    assert not Order.objects.filter(request__certificate=cert).exists()
    # The CA was never asked: Pebble's log has no newOrder request at all (and it was up: the
    # issuer registered its ACME account there).
    assert pebble_log_count(stack, "/sign-me-up -> calling handler()") >= 1
    assert pebble_log_count(stack, NEW_ORDER_REQUEST) == 0
    assert Event.objects.filter(name="lex-bad", reason="DNSPreflightFailed").count() == 1
    issuer.refresh_from_db()
    assert issuer.condition_is(preflight_step.CONDITION, "False")
    assert not any("wrong-key" in e.message for e in Event.objects.all())
