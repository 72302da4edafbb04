"""requireDnsResolvesToIps against a real DNS server (pebble-challtestsrv)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import override_settings

from issuance.approval.checks import run_checks
from tests.approval.test_checks import NODE
from tests.e2e.servers import ChallTestSrv, start_challtestsrv

pytestmark = pytest.mark.e2e
RULE = {"requireDnsResolvesToIps": True}


@pytest.fixture
def dns(tmp_path: Path) -> Iterator[ChallTestSrv]:
    server = start_challtestsrv(tmp_path, default_ipv4="")
    try:
        with override_settings(SELF_CHECK_NAMESERVERS=[server.dns_address]):
            yield server
    finally:
        server.stop()


def test_names_resolving_to_the_requested_ips_pass(dns: ChallTestSrv) -> None:
    dns.add_a("node-1.example.test", ["10.0.0.5"])
    dns.add_a("node-1", ["10.0.0.6", "10.0.0.5"])
    (check,) = run_checks(RULE, NODE)
    assert check.passed, check.detail
    assert "node-1.example.test → 10.0.0.5" in check.detail


def test_name_resolving_elsewhere_fails(dns: ChallTestSrv) -> None:
    dns.add_a("node-1.example.test", ["10.0.0.5"])
    dns.add_a("node-1", ["10.9.9.9"])
    (check,) = run_checks(RULE, NODE)
    assert not check.passed
    assert "node-1 resolves to 10.9.9.9, none of the request's IP addresses" in check.detail


def test_unresolvable_name_fails(dns: ChallTestSrv) -> None:
    facts = dataclasses.replace(NODE, dns_names=["ghost.example.test"])
    (check,) = run_checks(RULE, facts)
    assert not check.passed
    assert "ghost.example.test does not resolve" in check.detail


def test_without_ip_sans_resolving_is_enough(dns: ChallTestSrv) -> None:
    dns.add_a("node-1.example.test", ["192.0.2.1"])
    facts = dataclasses.replace(NODE, dns_names=["node-1.example.test"], ip_addresses=[])
    (check,) = run_checks(RULE, facts)
    assert check.passed, check.detail
