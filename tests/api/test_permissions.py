"""The role matrix: every mutating endpoint × every role, with exact status codes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.models import ApiToken, Certificate, CertificateRequest, Event, Issuer
from tests.factories import csr_pem

ROLES = ("viewer", "operator", "approver", "admin", "nobody", "anonymous")
OPERATORS = {"operator", "admin"}
APPROVERS = {"approver", "admin"}
ADMINS = {"admin"}
READERS = {"viewer", "operator", "approver", "admin"}


def _issuer_body() -> dict[str, Any]:
    return {"name": "new-issuer", "spec": {"selfSigned": {}}}


def _cert_body() -> dict[str, Any]:
    return {
        "name": "new-cert",
        "spec": {"dnsNames": ["new.example.test"], "issuerRef": {"name": "ss"}},
    }


def _cr_body() -> dict[str, Any]:
    return {"name": "new-cr", "spec": {"request": csr_pem(), "issuerRef": {"name": "ca"}}}


# (id, method, url, body, roles allowed, status when allowed)
ENDPOINTS: list[tuple[str, str, str, Callable[[], Any] | None, set[str], int]] = [
    ("issuer-create", "post", "/api/v1/issuers/", _issuer_body, OPERATORS, 201),
    (
        "issuer-put",
        "put",
        "/api/v1/issuers/spare/",
        lambda: {"spec": {"selfSigned": {"maxDuration": "24h"}}},
        OPERATORS,
        200,
    ),
    (
        "issuer-patch",
        "patch",
        "/api/v1/issuers/spare/",
        lambda: {"spec": {"selfSigned": {"maxDuration": "24h"}}},
        OPERATORS,
        200,
    ),
    ("issuer-delete", "delete", "/api/v1/issuers/spare/", None, OPERATORS, 204),
    ("cert-create", "post", "/api/v1/certificates/", _cert_body, OPERATORS, 201),
    (
        "cert-put",
        "put",
        "/api/v1/certificates/web/",
        lambda: {"spec": {"dnsNames": ["web2.example.test"], "issuerRef": {"name": "ss"}}},
        OPERATORS,
        200,
    ),
    (
        "cert-patch",
        "patch",
        "/api/v1/certificates/web/",
        lambda: {"spec": {"dnsNames": ["web2.example.test"]}},
        OPERATORS,
        200,
    ),
    ("cert-delete", "delete", "/api/v1/certificates/web/", None, OPERATORS, 204),
    ("cert-renew", "post", "/api/v1/certificates/web/renew/", None, OPERATORS, 202),
    ("cert-secret", "get", "/api/v1/certificates/web/secret/", None, ADMINS, 200),
    ("cr-create", "post", "/api/v1/certificaterequests/", _cr_body, OPERATORS, 201),
    (
        "cr-put",
        "put",
        "/api/v1/certificaterequests/ext-1/",
        lambda: {"spec": {"request": csr_pem("other.example.test"), "issuerRef": {"name": "ca"}}},
        OPERATORS,
        409,
    ),
    (
        "cr-patch",
        "patch",
        "/api/v1/certificaterequests/ext-1/",
        lambda: {"spec": {"duration": "1h"}},
        OPERATORS,
        409,
    ),
    ("cr-delete", "delete", "/api/v1/certificaterequests/ext-1/", None, OPERATORS, 204),
    (
        "cr-approve",
        "post",
        "/api/v1/certificaterequests/ext-1/approve/",
        lambda: {"reason": "Checked", "message": "looks fine"},
        APPROVERS,
        200,
    ),
    (
        "cr-deny",
        "post",
        "/api/v1/certificaterequests/ext-1/deny/",
        lambda: {"reason": "Unknown", "message": "who is this"},
        APPROVERS,
        200,
    ),
]


def _client(
    role: str, role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> Any:
    return api_client_for(None if role == "anonymous" else role_users[role])


def _snapshot() -> dict[str, Any]:
    return {
        "issuers": sorted(Issuer.objects.values_list("name", "generation", "spec")),
        "certs": sorted(Certificate.objects.values_list("name", "generation", "spec")),
        "requests": sorted(CertificateRequest.objects.values_list("name", "approval")),
        "renew": list(Certificate.objects.values_list("renew_requested_by", flat=True)),
    }


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    ("method", "url", "body", "allowed", "ok"),
    [pytest.param(*e[1:], id=e[0]) for e in ENDPOINTS],
)
def test_mutating_endpoint_matrix(
    world: dict[str, Any],
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], APIClient],
    role: str,
    method: str,
    url: str,
    body: Callable[[], Any] | None,
    allowed: set[str],
    ok: int,
) -> None:
    client = _client(role, role_users, api_client_for)
    before = _snapshot()
    response = getattr(client, method)(url, body() if body else None, format="json")
    if role in allowed:
        assert response.status_code == ok, response.content
    elif role == "anonymous":
        assert response.status_code == 401, response.content
        assert _snapshot() == before
    else:
        assert response.status_code == 403, response.content
        assert _snapshot() == before
        # Refusals say which role is missing.
        assert "role" in response.json()["detail"]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/issuers/",
        "/api/v1/issuers/ss/",
        "/api/v1/certificates/",
        "/api/v1/certificates/web/",
        "/api/v1/certificaterequests/",
        "/api/v1/certificaterequests/ext-1/",
        "/api/v1/orders/",
        "/api/v1/challenges/",
        "/api/v1/events/",
        "/api/v1/scheduler/",
    ],
)
def test_read_matrix(
    world: dict[str, Any],
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], APIClient],
    role: str,
    url: str,
) -> None:
    response = _client(role, role_users, api_client_for).get(url)
    expected = 200 if role in READERS else (401 if role == "anonymous" else 403)
    assert response.status_code == expected, response.content


@pytest.mark.parametrize("role", ["viewer", "admin"])
@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("put", "/api/v1/orders/x/"),
        ("post", "/api/v1/orders/"),
        ("delete", "/api/v1/challenges/x/"),
        ("post", "/api/v1/events/"),
        ("post", "/api/v1/scheduler/"),
    ],
)
def test_read_only_resources_refuse_writes(
    world: dict[str, Any],
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], APIClient],
    role: str,
    method: str,
    url: str,
) -> None:
    response = getattr(api_client_for(role_users[role]), method)(url, {}, format="json")
    assert response.status_code == 405


def test_superuser_is_admin(
    world: dict[str, Any],
    make_user: Callable[..., Any],
    api_client_for: Callable[[User | None], APIClient],
) -> None:
    root = make_user("root", superuser=True)
    response = api_client_for(root).get("/api/v1/certificates/web/secret/")
    assert response.status_code == 200
    assert "PRIVATE KEY" in response.json()["tls.key"]
    assert Event.objects.filter(reason="SecretRead", actor="root").count() == 1


def test_token_auth(world: dict[str, Any], role_users: dict[str, User]) -> None:
    from io import StringIO

    from django.core.management import call_command
    from rest_framework.test import APIClient

    out = StringIO()
    call_command("api_token", "operator", "--name", "ci", stdout=out)
    token = out.getvalue().strip()
    assert ApiToken.objects.get(user=role_users["operator"]).name == "ci"
    client = APIClient()
    assert client.get("/api/v1/certificates/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/certificates/").status_code == 200
    assert client.post("/api/v1/certificates/web/renew/").status_code == 202
    assert client.get("/api/v1/certificates/web/secret/").status_code == 403
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get("/api/v1/certificates/").status_code == 401


def test_token_endpoint_and_session_auth(
    world: dict[str, Any], role_users: dict[str, User]
) -> None:
    from rest_framework.test import APIClient

    client = APIClient()
    response = client.post(
        "/api/v1/token/", {"username": "viewer", "password": "pw-viewer"}, format="json"
    )
    assert response.status_code == 200
    token = response.json()["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/issuers/").status_code == 200
    assert client.post("/api/v1/issuers/", _issuer_body(), format="json").status_code == 403

    session = APIClient(enforce_csrf_checks=True)
    assert session.login(username="operator", password="pw-operator")
    assert session.get("/api/v1/certificates/").status_code == 200
    # Session auth needs the CSRF token for writes, as the browser console sends it.
    assert session.post("/api/v1/certificates/web/renew/").status_code == 403
