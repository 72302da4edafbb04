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
def test_spectacular_validate_passes(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    assert set(schema["paths"]) >= EXPECTED_PATHS
    # No generator warning or error about the resource API's views.
    problems = [line for line in capsys.readouterr().err.splitlines() if "issuance/api/" in line]
    assert problems == []
