"""Request bodies are held to their schema: what it calls invalid is a 400 naming the field,
what it allows is accepted (PATCH without a spec, the read-only fields of a GET sent back)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.models import Certificate
from tests.api.conftest import counts


@pytest.fixture
def operator(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["operator"])


@pytest.fixture
def approver(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["approver"])


SPEC = {"dnsNames": ["new.example.test"], "issuerRef": {"name": "ss"}}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": 5, "spec": SPEC}, "name"),
        ({"name": "web\n", "spec": SPEC}, "name"),  # `$` would let a trailing newline through
        ({"name": " new", "spec": SPEC}, "name"),  # not trimmed into another name
        ({"name": "", "spec": SPEC}, "name"),
        ({"name": "new", "spec": None}, "spec"),
        ({"name": "new", "spec": ["dnsNames"]}, "spec"),
        ({"name": "new", "spec": SPEC, "kind": "Issuer"}, "kind"),
        ({"name": "new", "spec": SPEC, "apiVersion": "v1"}, "apiVersion"),
        ({"spec": SPEC, "metadata": {"name": 5}}, "metadata"),
        ({"spec": SPEC, "metadata": {"name": None}}, "metadata"),
        ({"spec": SPEC, "metadata": {"name": "Bad"}}, "metadata"),
        ({"spec": SPEC, "metadata": "new"}, "metadata"),
        ({"name": "new", "spec": SPEC, "metadata": {"name": "other"}}, "metadata.name"),
    ],
)
def test_schema_violations_are_400(
    world: dict[str, Any], operator: APIClient, body: dict[str, Any], field: str
) -> None:
    before = counts()
    response = operator.post("/api/v1/certificates/", body, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert counts() == before


def test_unknown_fields_and_field_errors_together(
    world: dict[str, Any], operator: APIClient
) -> None:
    response = operator.post(
        "/api/v1/certificates/", {"name": 5, "spec": None, "colour": "blue"}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == {
        "colour": ["unsupported field"],
        "name": ["Not a valid string."],
        "spec": ["This field may not be null."],
    }


@pytest.fixture
def created(world: dict[str, Any], operator: APIClient) -> str:
    """A certificate created through the API (its stored spec is the normalized one)."""
    response = operator.post("/api/v1/certificates/", {"name": "new", "spec": SPEC}, format="json")
    assert response.status_code == 201, response.content
    return "/api/v1/certificates/new/"


def test_a_get_answer_can_be_sent_back(created: str, operator: APIClient) -> None:
    """status, createdAt, updatedAt and generation are ignored, null included."""
    got = operator.get(created).json()
    response = operator.put(created, got, format="json")
    assert response.status_code == 200, response.content
    nulls = {**got, "status": None, "createdAt": None, "updatedAt": None, "generation": None}
    response = operator.put(created, nulls, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["generation"] == got["generation"] == 1


@pytest.mark.parametrize("issuer", [False, True])
def test_patch_without_a_spec_changes_nothing(
    created: str, operator: APIClient, admin: APIClient, issuer: bool
) -> None:
    url = "/api/v1/issuers/ss/" if issuer else created
    client = admin if issuer else operator  # issuers are changed by admins
    before = client.get(url).json()
    response = client.patch(url, {"name": before["name"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["spec"] == before["spec"]
    assert response.json()["generation"] == before["generation"]


def test_immutable_request_checks_the_body_first(
    world: dict[str, Any], operator: APIClient
) -> None:
    url = "/api/v1/certificaterequests/ext-1/"
    assert operator.patch(url, {"spec": "x"}, format="json").status_code == 400
    assert operator.patch(url, {}, format="json").status_code == 409


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": 0}, "message"),
        ({"reason": ["Checked"]}, "reason"),
        ({"reason": None}, "reason"),
        ({"message": "x" * 1025}, "message"),
    ],
)
def test_decision_body_fields(
    world: dict[str, Any], approver: APIClient, body: dict[str, Any], field: str
) -> None:
    response = approver.post("/api/v1/certificaterequests/ext-1/approve/", body, format="json")
    assert response.status_code == 400, response.content
    assert list(response.json()) == [field]
    assert Certificate.objects.count() == 1


@pytest.mark.parametrize("body", ["[]", '"approve"', "null", "5"])
def test_decision_body_must_be_an_object(
    world: dict[str, Any], approver: APIClient, body: str
) -> None:
    response = approver.post(
        "/api/v1/certificaterequests/ext-1/approve/", body, content_type="application/json"
    )
    assert response.status_code == 400, response.content
    assert approver.get("/api/v1/certificaterequests/ext-1/").json()["status"]["approval"] == (
        "Pending"
    )


def test_decision_without_a_body(world: dict[str, Any], approver: APIClient) -> None:
    response = approver.post("/api/v1/certificaterequests/ext-1/deny/")
    assert response.status_code == 200, response.content
    assert response.json()["status"]["approval"] == "Denied"


def test_huge_expiration_is_a_400(world: dict[str, Any], operator: APIClient) -> None:
    """timedelta(seconds=10**15) overflows: it used to be a 500."""
    from tests.factories import csr_pem

    spec = {"request": csr_pem(), "issuerRef": {"name": "ca"}, "expirationSeconds": 10**15}
    response = operator.post("/api/v1/certificaterequests/", {"spec": spec}, format="json")
    assert response.status_code == 400, response.content
    assert "spec.expirationSeconds" in response.json()
