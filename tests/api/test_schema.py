"""The OpenAPI schema is served, lists every endpoint, and validates without warnings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from rest_framework.test import APIClient

EXPECTED_PATHS = {
    "/api/v1/issuers/",
    "/api/v1/issuers/{name}/",
    "/api/v1/certificates/",
    "/api/v1/certificates/{name}/",
    "/api/v1/certificates/{name}/renew/",
    "/api/v1/certificates/{name}/secret/",
    "/api/v1/certificaterequests/",
    "/api/v1/certificaterequests/{name}/",
    "/api/v1/certificaterequests/{name}/approve/",
    "/api/v1/certificaterequests/{name}/deny/",
    "/api/v1/orders/",
    "/api/v1/orders/{name}/",
    "/api/v1/challenges/",
    "/api/v1/challenges/{name}/",
    "/api/v1/events/",
    "/api/v1/scheduler/",
}


@pytest.mark.django_db
def test_schema_endpoint_lists_all_paths() -> None:
    response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    assert set(schema["paths"]) >= EXPECTED_PATHS
    certificate = schema["components"]["schemas"]["Certificate"]
    assert {"name", "spec", "status"} <= set(certificate["properties"])
    status = schema["components"]["schemas"]["CertificateStatus"]["properties"]
    assert {"nextRetryTime", "renewalTime", "failedIssuanceAttempts"} <= set(status)
    assert "put" in schema["paths"]["/api/v1/certificates/{name}/"]
    assert "put" not in schema["paths"]["/api/v1/orders/{name}/"]


@pytest.mark.django_db
def test_spectacular_validate_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    assert set(schema["paths"]) >= EXPECTED_PATHS
    # No generator warning or error about the resource API's views.
    problems = [line for line in capsys.readouterr().err.splitlines() if "issuance/api/" in line]
    assert problems == []


@pytest.fixture
def schema(db: None) -> dict[str, Any]:
    response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "responses" in op
    ]


def test_nullable_fields_are_declared_nullable(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    nullable = {
        "CertificateStatus": [
            "notBefore",
            "notAfter",
            "renewalTime",
            "revision",
            "lastFailureTime",
            "failedIssuanceAttempts",
            "nextRetryTime",
            "renewRequestedAt",
            "caUnreachable",
            "renewalInfo",
        ],
        "CertificateRenewalInfo": [
            "windowStart",
            "windowEnd",
            "selectedTime",
            "lastChecked",
            "nextCheck",
        ],
        "CertificateRequest": ["owner"],
        "CertificateRequestStatus": ["decidedAt", "failureTime"],
        "OrderStatus": ["failureTime"],
        "Order": ["certificate"],
        "ChallengeStatus": ["presentedAt", "scheduledAt", "nextCheckAt"],
        "IssuerStatus": ["acme", "ca"],
        "IssuerCAStatus": ["unreachableSince", "nextProbeAt"],
        "SchedulerState": ["oldestQueuedAt"],
        "BootstrapStatus": ["decidedAt", "certificate", "ca", "failureTime"],
    }
    for component, fields in nullable.items():
        properties = components[component]["properties"]
        for field in fields:
            assert properties[field].get("nullable") is True, (component, field)
    # ... and the others are not: a required string never comes back null.
    assert "nullable" not in components["CertificateStatus"]["properties"]["lastError"]


def test_every_operation_documents_its_error_statuses(schema: dict[str, Any]) -> None:
    for method, path, op in operations(schema):
        statuses = set(op["responses"])
        label = f"{method} {path}"
        assert {"400", "401", "503"} <= statuses, label
        assert ("404" in statuses) == ("{" in path), label
        if method in {"POST", "PUT", "PATCH", "DELETE"}:
            assert "409" in statuses, label
        if "requestBody" in op:
            assert {"413", "415"} <= statuses, label
        if not path.startswith("/api/v1/bootstrap/"):
            assert "403" in statuses, label
        for status, answer in op["responses"].items():
            if status >= "400" and status != "503":
                content = answer["content"]["application/json"]["schema"]["$ref"]
                assert content.endswith("ValidationError" if status == "400" else "/Error"), label
    bootstrap = schema["paths"]["/api/v1/bootstrap/certificaterequests/"]
    assert "429" in bootstrap["post"]["responses"]
    assert "201" in bootstrap["post"]["responses"]


def test_query_parameters_are_documented_with_their_rules(schema: dict[str, Any]) -> None:
    listing = {
        p["name"]: p["schema"] for p in schema["paths"]["/api/v1/challenges/"]["get"]["parameters"]
    }
    assert set(listing) == {"order", "dnsName", "type", "state", "processing", "limit", "offset"}
    assert listing["type"] == {"type": "string", "enum": ["http-01", "dns-01"]}
    assert listing["processing"] == {"type": "boolean"}
    assert listing["order"]["pattern"] == "^[^\\u0000-\\u001f\\u007f]*$"
    assert listing["limit"] == {"type": "integer", "minimum": 1, "maximum": 1000}
    assert listing["offset"]["minimum"] == 0
    issuers = schema["paths"]["/api/v1/issuers/"]["get"]["parameters"]
    assert {p["name"] for p in issuers} == {"kind", "limit", "offset"}
    detail = schema["paths"]["/api/v1/certificates/{name}/"]["get"]["parameters"]
    assert detail == [
        {
            "in": "path",
            "name": "name",
            "required": True,
            "schema": {
                "type": "string",
                "pattern": "^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$",
                "maxLength": 253,
            },
        }
    ]


def test_request_bodies_refuse_unknown_fields(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    for name in ("CertificateWriteRequest", "PatchedIssuerWriteRequest", "BootstrapSubmitRequest"):
        assert components[name]["additionalProperties"] is False, name
    write = components["CertificateWriteRequest"]
    assert write["required"] == ["spec"]
    assert write["properties"]["kind"] == {"$ref": "#/components/schemas/CertificateWriteKindEnum"}
    assert "required" not in components["PatchedCertificateWriteRequest"]


def test_security_schemes(schema: dict[str, Any]) -> None:
    schemes = schema["components"]["securitySchemes"]
    assert schemes["bootstrapToken"]["scheme"] == "bearer"
    paths = schema["paths"]
    assert paths["/api/v1/bootstrap/certificaterequests/"]["get"]["security"] == [
        {"bootstrapToken": []}
    ]
    assert {} in paths["/api/v1/token/"]["post"]["security"]  # anyone may ask for a token
    assert {} not in paths["/api/v1/certificates/"]["get"]["security"]


def test_schema_generates_without_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], db: None
) -> None:
    call_command("spectacular", "--validate", "--file", str(tmp_path / "schema.yaml"))
    err = capsys.readouterr().err
    assert "Warning" not in err and "Error" not in err, err
