"""The DNS-01 preflight and the lexicon solver against a real PowerDNS (lexicon's powerdns
provider) and a real BIND9 (rfc2136): SOA walk, CNAME delegation, bad credentials, a zone
nobody serves; present/cleanup through a CNAME; "Test DNS" on the issuer page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction
from django.test import Client
from django.utils import timezone

from issuance.acme.solvers import preflight, preflight_step
from issuance.acme.solvers.lexicon_dns import LexiconSolver
from issuance.models import Challenge, Issuer
from issuance.specs.secret_refs import OPAQUE, SecretWrite, store
from tests.e2e.bind9 import Bind9Server, bind9_server
from tests.e2e.powerdns import PowerDnsServer, powerdns_server

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def pdns(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PowerDnsServer]:
    with powerdns_server(Path(tmp_path_factory.mktemp("pdns-preflight"))) as server:
        yield server


@pytest.fixture
def at_pdns(pdns: PowerDnsServer, settings: Any, db: Any) -> PowerDnsServer:
    settings.SELF_CHECK_NAMESERVERS = [pdns.address]
    with transaction.atomic():
        store(SecretWrite("pdns-good", "test", type=OPAQUE, data={"auth_token": pdns.api_key}))
        store(SecretWrite("pdns-bad", "test", type=OPAQUE, data={"auth_token": "nope"}))
    preflight_step.forget_cache()
    return pdns


def solver(pdns: PowerDnsServer, secret: str = "pdns-good", **dns01: Any) -> dict[str, Any]:
    block = {
        "provider": "powerdns",
        "credentialsSecretRef": {"name": secret},
        "pdns_server": pdns.api_url,
    }
    return {"dns01": {"lexicon": block, **dns01}}


def test_soa_walk_finds_the_zone_and_the_provider_answers(at_pdns: PowerDnsServer) -> None:
    result = preflight.run(solver(at_pdns), "deep.sub.example.test")
    assert result.ok, result.message
    assert result.zone == "example.test"
    assert result.record == "_acme-challenge.deep.sub.example.test."
    assert "powerdns answered" in result.message
    assert result.seconds < 10


def test_cname_delegation_is_followed_to_the_zone_that_holds_the_record(
    at_pdns: PowerDnsServer,
) -> None:
    at_pdns.add_record(
        "_acme-challenge.cn.example.test", "CNAME", "_acme-challenge.target.example.org."
    )
    result = preflight.run(solver(at_pdns, cnameStrategy="Follow"), "cn.example.test")
    assert result.ok, result.message
    assert result.record == "_acme-challenge.target.example.org."
    assert result.zone == "example.org"
    assert "via CNAME from _acme-challenge.cn.example.test." in result.message
    refused = preflight.run(solver(at_pdns), "cn.example.test")
    assert not refused.ok
    assert "is a CNAME to _acme-challenge.target.example.org." in refused.message
    assert "cnameStrategy: Follow" in refused.message


def test_bad_credentials_fail_with_the_reason(at_pdns: PowerDnsServer) -> None:
    result = preflight.run(solver(at_pdns, secret="pdns-bad"), "www.example.test")
    assert not result.ok
    assert "powerdns API answered HTTP 401" in result.message
    assert "bad credentials" in result.message and "nope" not in result.message
    missing = preflight.run(solver(at_pdns, secret="pdns-missing"), "www.example.test")
    assert not missing.ok and "secret 'pdns-missing' not found" in missing.message


def test_a_zone_nobody_serves_fails(at_pdns: PowerDnsServer) -> None:
    result = preflight.run(solver(at_pdns), "www.not-served.invalid")
    assert not result.ok
    assert "_acme-challenge.www.not-served.invalid" in result.message


def test_present_and_cleanup_through_a_cname_touch_only_our_value(
    at_pdns: PowerDnsServer,
) -> None:
    at_pdns.add_record(
        "_acme-challenge.deleg.example.test", "CNAME", "_acme-challenge.held.example.org."
    )
    at_pdns.add_record("_acme-challenge.held.example.org", "TXT", '"someone-else"')
    dns01 = solver(at_pdns, cnameStrategy="Follow")["dns01"]
    lexicon = LexiconSolver(dns01)
    chal = Challenge(dns_name="deleg.example.test", type="dns-01", spec={"key": "ours-1"})
    lexicon.present(chal)
    lexicon.present(chal)  # idempotent
    held = "_acme-challenge.held.example.org"
    assert at_pdns.api_txt(held) == ["ours-1", "someone-else"]
    assert at_pdns.txt(held) == ["ours-1", "someone-else"]
    assert lexicon.self_check(chal) is None
    lexicon.cleanup(chal)
    lexicon.cleanup(chal)  # idempotent
    assert at_pdns.api_txt(held) == ["someone-else"]
    assert "not yet propagated" in (lexicon.self_check(chal) or "")


def test_rfc2136_preflight_asks_the_configured_nameserver(
    tmp_path: Path, settings: Any, db: Any
) -> None:
    with bind9_server(tmp_path) as bind:
        settings.SELF_CHECK_NAMESERVERS = [bind.address]
        ok = preflight.run(_rfc2136(bind), "www.example.org")
        assert ok.ok, ok.message
        assert ok.zone == "example.org"
        assert f"nameserver {bind.address} serves it" in ok.message


def _rfc2136(bind: Bind9Server) -> dict[str, Any]:
    return {
        "dns01": {
            "rfc2136": {
                "nameserver": bind.address,
                "tsigKeyName": bind.key_name,
                "tsigAlgorithm": "HMACSHA256",
                "tsigSecret": bind.secret,
            }
        }
    }


def _issuer(pdns: PowerDnsServer, name: str, secret: str) -> Issuer:
    spec = {"acme": {"server": "https://ca.invalid/dir", "solvers": [solver(pdns, secret)]}}
    return Issuer.objects.create(name=name, kind="acme", spec=spec, due_at=timezone.now())


def test_test_dns_on_the_issuer_page(at_pdns: PowerDnsServer, role_users: Any) -> None:
    good = _issuer(at_pdns, "pdns-ok", "pdns-good")
    bad = _issuer(at_pdns, "pdns-ko", "pdns-bad")
    client = Client()
    client.force_login(role_users["operator"])
    page = client.get("/issuers/").content.decode()
    assert 'action="/issuers/pdns-ok/test-dns/"' in page and "not run yet" in page
    assert "DNS-01 (lexicon: powerdns): default" in page

    response = client.post("/issuers/pdns-ok/test-dns/", {"dns_name": "www.example.test"})
    assert response.status_code == 302
    html = client.get("/issuers/").content.decode()
    assert "Test DNS www.example.test: passed in" in html
    assert "in zone example.test" in html
    good.refresh_from_db()
    assert good.condition_is(preflight_step.CONDITION)

    client.post("/issuers/pdns-ko/test-dns/", {"dns_name": "www.example.test"})
    html = client.get("/issuers/").content.decode()
    assert "Test DNS www.example.test: failed in" in html
    assert "HTTP 401" in html and "DNSPreflightFailed" in html
    bad.refresh_from_db()
    assert bad.condition_is(preflight_step.CONDITION, "False")
