"""API authorization beyond the generated matrix: 405s, superusers, tokens, sessions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.models import ApiToken, Event

# The role matrix of every operation is generated from the permission table:
# tests/access/test_permission_matrix.py. What stays here: writes to read-only resources,
# superusers, token and session authentication.


def _issuer_body() -> dict[str, Any]:
    return {"name": "new-issuer", "spec": {"selfSigned": {}}}


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
