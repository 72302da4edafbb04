"""cert-manager's HTTP-01 cluster settings (http01.ingress, http01.gatewayHTTPRoute) through
POST /api/v1/issuers/: stored as written, the Issuer Ready=False SolverNotUsable naming the
field; an empty block or `http01: {}` is the console's own HTTP-01 and registers as before."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from issuance.acme import health, ratelimit
from issuance.acme.accounts import forget_clients
from issuance.controllers import issuers as issuer_controller
from issuance.models import Issuer
from tests.acme.fakeca import FakeCA
from tests.api.conftest import counts

pytestmark = pytest.mark.django_db


@pytest.fixture
def tls_ca() -> Iterator[FakeCA]:
    """An https ACME server (the spec takes only https directory URLs)."""
    server = FakeCA(tls=True)
    ratelimit.forget_cache()
    health.forget()
    forget_clients()
    yield server
    server.stop()
    forget_clients()
    ratelimit.forget_cache()
    health.forget()


def create(admin: APIClient, name: str, ca: FakeCA, http01: dict[str, Any]) -> Issuer:
    spec = {
        "acme": {
            "server": ca.directory_url,
            "caBundle": ca.ca_bundle_b64,
            "solvers": [{"selector": {"dnsZones": ["example.test"]}, "http01": http01}],
        }
    }
    response = admin.post("/api/v1/issuers/", {"name": name, "spec": spec}, format="json")
    assert response.status_code == 201, response.content
    issuer = Issuer.objects.get(name=name)
    issuer_controller.reconcile(issuer)
    issuer.refresh_from_db()
    return issuer


@pytest.mark.parametrize(
    ("http01", "field", "routed"),
    [
        (
            {"ingress": {"ingressClassName": "nginx", "serviceType": "NodePort"}},
            "ingress",
            "an Ingress",
        ),
        (
            {"gatewayHTTPRoute": {"parentRefs": [{"name": "gw", "kind": "Gateway"}]}},
            "gatewayHTTPRoute",
            "a Gateway API HTTPRoute",
        ),
    ],
)
def test_cluster_settings_are_stored_and_reported_not_usable(
    world: dict[str, Any],
    admin: APIClient,
    tls_ca: FakeCA,
    http01: dict[str, Any],
    field: str,
    routed: str,
) -> None:
    issuer = create(admin, "cluster-http01", tls_ca, http01)
    assert issuer.spec["acme"]["solvers"][0]["http01"] == http01
    ready = issuer.get_condition("Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "SolverNotUsable")
    assert ready["message"].startswith(
        f"spec.acme.solvers[0].http01.{field}: cert-manager routes HTTP-01 through {routed}"
    )
    assert "use `http01: {}`" in ready["message"]
    assert tls_ca.hits["/acct"] == 0, "no account registered for an Issuer that cannot solve"
    # The API shows the same condition.
    shown = admin.get(f"/api/v1/issuers/{issuer.name}/").json()
    assert any(c.get("reason") == "SolverNotUsable" for c in shown["status"]["conditions"]), shown


@pytest.mark.parametrize("http01", [{}, {"ingress": {}}, {"gatewayHTTPRoute": None}])
def test_the_console_s_own_http01_registers_as_before(
    world: dict[str, Any], admin: APIClient, tls_ca: FakeCA, http01: dict[str, Any]
) -> None:
    issuer = create(admin, "own-http01", tls_ca, http01)
    assert issuer.spec["acme"]["solvers"][0]["http01"] == {}, "empty blocks are not kept"
    ready = issuer.get_condition("Ready")
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("True", "ACMEAccountRegistered"), ready


@pytest.mark.parametrize(
    ("http01", "field"),
    [
        ({"ingress": {"ingressClass": "nginx"}}, "http01.ingress.ingressClass"),
        ({"gatewayHTTPRoute": {"parentRef": []}}, "http01.gatewayHTTPRoute.parentRef"),
        ({"ingress": {"podTemplate": "x"}}, "http01.ingress.podTemplate"),
        ({"ingress": "nginx"}, "http01.ingress"),
    ],
)
def test_bad_settings_are_a_400_naming_the_field(
    world: dict[str, Any], admin: APIClient, http01: dict[str, Any], field: str
) -> None:
    before = counts()
    spec = {"acme": {"server": "https://a.test/dir", "solvers": [{"http01": http01}]}}
    response = admin.post("/api/v1/issuers/", {"name": "bad", "spec": spec}, format="json")
    assert response.status_code == 400, response.content
    assert f"spec.acme.solvers[0].{field}" in response.json(), response.json()
    assert counts() == before
