"""The certificate create path: its statements, its answers, token auth, the response shape.

POST /api/v1/certificates/ is what bulk issuance calls once per certificate, so its
statements are counted here; the answers (409, field-named 400s, the event, the wake-up)
must be the same as before it was trimmed.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pytest_django import DjangoCaptureOnCommitCallbacks
from rest_framework import serializers
from rest_framework.test import APIClient

from issuance.access.apitokens import create_token, revoke_token
from issuance.api.certificates import CertificateSerializer, CertificateStatusSerializer
from issuance.models import ApiToken, Certificate, Event
from issuance.worker import wakeup
from tests.api.conftest import counts
from tests.factories import make_certificate


@pytest.fixture
def operator(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["operator"])


def body(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "name": name,
        "spec": {"dnsNames": [f"{name}.example.test"], "issuerRef": {"name": "ss"}, **spec},
    }


def statements(ctx: CaptureQueriesContext) -> list[str]:
    """The SQL run on tables (no transaction control, no NOTIFY)."""
    dml = ("SELECT", "INSERT", "UPDATE", "DELETE")
    return [q["sql"] for q in ctx.captured_queries if q["sql"].startswith(dml)]


def test_create_is_four_statements_and_wakes_the_worker(
    world: dict[str, Any],
    operator: APIClient,
    django_capture_on_commit_callbacks: DjangoCaptureOnCommitCallbacks,
) -> None:
    operator.post("/api/v1/certificates/", body("warm"), format="json")  # the user's roles
    wakeup.local_wakeup.clear()
    before = timezone.now()
    with (
        CaptureQueriesContext(connection) as ctx,
        django_capture_on_commit_callbacks(execute=True),
    ):
        response = operator.post("/api/v1/certificates/", body("shop"), format="json")
    assert response.status_code == 201, response.content
    sql = statements(ctx)
    # Existence, the issuer (locked; also validation's lookup), the row, its event: no
    # second existence check, no separate issuer check, no wake-up UPDATE.
    assert len(sql) == 4, sql
    assert [s.split()[0] for s in sql] == ["SELECT", "SELECT", "INSERT", "INSERT"]
    cert = Certificate.objects.get(name="shop")
    # As wake() leaves a row: due now, wake_seq bumped once; and the worker was woken.
    assert cert.due_at is not None and before <= cert.due_at <= timezone.now()
    assert cert.wake_seq == 1
    assert wakeup.local_wakeup.is_set()
    assert cert.issuer_id == world["ss"].pk
    assert Event.objects.filter(name="shop", reason="Created", actor="operator").count() == 1


def test_duplicate_is_409_even_with_an_invalid_spec(
    world: dict[str, Any], operator: APIClient
) -> None:
    """The name is checked before the spec, as before: an existing name is a 409."""
    before = counts()
    for spec in (body("web")["spec"], {"dnsNames": ["bad_name"], "issuerRef": {"name": "nope"}}):
        response = operator.post(
            "/api/v1/certificates/", {"name": "web", "spec": spec}, format="json"
        )
        assert response.status_code == 409, response.content
        assert response.json() == {
            "detail": "Certificate 'web' already exists; use PUT or PATCH to change it."
        }
    assert counts() == before


def test_unknown_issuer_is_named_with_the_other_errors(
    world: dict[str, Any], operator: APIClient
) -> None:
    before = counts()
    response = operator.post(
        "/api/v1/certificates/",
        body("x", issuerRef={"name": "nope"}, duration="soon"),
        format="json",
    )
    assert response.status_code == 400
    errors = response.json()
    assert errors["spec.issuerRef.name"] == ["unknown issuer 'nope'"]
    assert "spec.duration" in errors
    assert counts() == before


def test_update_still_reads_and_locks_the_row(world: dict[str, Any], operator: APIClient) -> None:
    """PUT goes through the general apply: an unchanged spec changes nothing, a new issuer
    is stored by key and read back correctly."""
    cert = world["web"]
    url = "/api/v1/certificates/web/"
    spec = {**cert.spec, "issuerRef": {"name": "spare", "kind": "Issuer"}}
    response = operator.put(url, {"spec": spec}, format="json")
    assert response.status_code == 200, response.content
    cert.refresh_from_db()
    assert cert.issuer.name == "spare" and cert.generation == 2
    assert operator.put(url, {"spec": spec}, format="json").json()["generation"] == 2


# -- token authentication ----------------------------------------------------------------


@pytest.fixture
def token_client(role_users: dict[str, User]) -> tuple[APIClient, ApiToken]:
    token, text = create_token(role_users["viewer"], "test", actor="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {text}")
    return client, token


def test_token_auth_is_one_query(
    world: dict[str, Any], token_client: tuple[APIClient, ApiToken]
) -> None:
    client, _ = token_client
    assert client.get("/api/v1/certificates/web/").status_code == 200
    with CaptureQueriesContext(connection) as ctx:
        assert client.get("/api/v1/certificates/web/").status_code == 200
    auth = [q["sql"] for q in ctx.captured_queries if "issuance_apitoken" in q["sql"]]
    # The user comes with the token; last_used_at was written by the first call and is not
    # written again within the minute.
    assert len(auth) == 1 and "auth_user" in auth[0] and auth[0].lstrip().startswith("SELECT")


def test_token_auth_errors_are_drfs(
    world: dict[str, Any], token_client: tuple[APIClient, ApiToken]
) -> None:
    client, token = token_client
    for header, detail in (
        ("Token wrong-key", "Invalid token."),
        ("Token", "Invalid token header. No credentials provided."),
        ("Token a b", "Invalid token header. Token string should not contain spaces."),
    ):
        response = APIClient().get("/api/v1/certificates/", HTTP_AUTHORIZATION=header)
        assert response.status_code == 401, header
        assert response.json() == {"detail": detail}
        assert response["WWW-Authenticate"] == "Token"
    token.user.is_active = False
    token.user.save()
    response = client.get("/api/v1/certificates/")
    assert (response.status_code, response.json()) == (
        401,
        {"detail": "User inactive or deleted."},
    )
    token.user.is_active = True
    token.user.save()
    assert client.get("/api/v1/certificates/").status_code == 200
    revoke_token(token.user, token.pk, actor="test")  # stops working at once (no cache)
    assert client.get("/api/v1/certificates/").status_code == 401


# -- the response shape ------------------------------------------------------------------


def _drf_representation(serializer_cls: type[serializers.Serializer[Any]], obj: Any) -> Any:
    """DRF's own algorithm over freshly copied fields (what the mixin skips)."""
    out: dict[str, Any] = {}
    for name, field in serializer_cls().fields.items():
        value = field.get_attribute(obj)
        if value is None:
            out[name] = None
        elif isinstance(field, serializers.Serializer):
            out[name] = _drf_representation(type(field), value)
        else:
            out[name] = field.to_representation(value)
    return out


def test_certificate_representation_is_drfs(world: dict[str, Any], operator: APIClient) -> None:
    now = timezone.now()
    full = make_certificate("full", world["ss"], commonName="full.example.test")
    full.set_condition("Ready", "True", "Ready", "Certificate is up to date", now=now)
    full.state = "Ready"
    full.revision = 3
    full.not_before = now - timedelta(days=1)
    full.not_after = now + timedelta(days=89)
    full.renewal_time = now + timedelta(days=60)
    full.last_failure_time = now - timedelta(hours=2)
    full.failed_issuance_attempts = 2
    full.next_retry_time = now + timedelta(hours=1)
    full.renew_requested_at = now
    full.renew_requested_by = "operator"
    full.last_error = "boom"
    full.save()
    for cert in (Certificate.objects.get(name="full"), Certificate.objects.get(name="web")):
        expected = _drf_representation(CertificateSerializer, cert)
        assert expected["status"] == _drf_representation(CertificateStatusSerializer, cert)
        assert CertificateSerializer(cert).data == expected
        assert operator.get(f"/api/v1/certificates/{cert.name}/").json() == expected
    listed = operator.get("/api/v1/certificates/?limit=10").json()["results"]
    assert listed == [
        _drf_representation(CertificateSerializer, c) for c in Certificate.objects.order_by("name")
    ]
    assert listed[0]["status"]["notAfter"].endswith("Z")
    assert listed[0]["status"]["revision"] == 3
