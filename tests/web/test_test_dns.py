"""The issuer page's "Test DNS" action: operator role, POST with CSRF, a valid name, an
issuer with a dns01 solver. (Against a real PowerDNS: tests/e2e/test_dns_preflight.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from issuance.models import Issuer
from tests.factories import make_acme_issuer

ClientFor = Callable[[str | None], Client]


@pytest.fixture
def dns_issuer(db: Any) -> Issuer:
    dns01 = {"webhook": {"url": "http://127.0.0.1:9/hook"}}
    spec = {"acme": {"server": "https://ca.invalid/dir", "solvers": [{"dns01": dns01}]}}
    return Issuer.objects.create(name="dnsy", kind="acme", spec=spec, due_at=timezone.now())


def test_test_dns_is_post_only_and_checks_csrf(
    client_for: ClientFor, dns_issuer: Issuer, role_users: Any
) -> None:
    assert client_for("operator").get("/issuers/dnsy/test-dns/").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(_operator())
    response = strict.post("/issuers/dnsy/test-dns/", {"dns_name": "www.example.test"})
    assert response.status_code == 403
    dns_issuer.refresh_from_db()
    assert dns_issuer.get_condition("DNSPreflight") is None


def _operator() -> Any:
    from django.contrib.auth.models import User

    return User.objects.get(username="operator")


def test_test_dns_refuses_a_bad_name_and_an_issuer_without_dns01(
    client_for: ClientFor, dns_issuer: Issuer
) -> None:
    client = client_for("operator")
    response = client.post("/issuers/dnsy/test-dns/", {"dns_name": "not a name"}, follow=True)
    assert "Test DNS for dnsy: name" in response.content.decode()
    make_acme_issuer("plain")
    response = client.post(
        "/issuers/plain/test-dns/", {"dns_name": "www.example.test"}, follow=True
    )
    assert "Issuer plain has no dns01 solver" in response.content.decode()
    assert client.post("/issuers/nosuch/test-dns/", {"dns_name": "a.test"}).status_code == 404


def test_the_issuer_page_offers_test_dns_to_operators_only(
    client_for: ClientFor, dns_issuer: Issuer
) -> None:
    make_acme_issuer("plain")
    page = client_for("operator").get("/issuers/").content.decode()
    assert 'action="/issuers/dnsy/test-dns/"' in page
    assert "/issuers/plain/test-dns/" not in page
    assert "csrfmiddlewaretoken" in page
    viewer = client_for("viewer").get("/issuers/").content.decode()
    assert "Test DNS" in viewer and 'action="/issuers/dnsy/test-dns/"' not in viewer
