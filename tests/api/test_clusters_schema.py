"""The cluster-mode API in the OpenAPI schema: every path, the kubeconfig write-only, the
Certificate's computed retry, the path parameters' patterns."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

NS = "/api/v1/clusters/{cluster}/namespaces/{namespace}"


@pytest.fixture
def schema(db: None) -> dict[str, Any]:
    answer = APIClient().get("/api/schema/?format=json")
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


def test_cluster_mode_paths(schema: dict[str, Any]) -> None:
    paths = set(schema["paths"])
    assert {
        "/api/v1/clusters/",
        "/api/v1/clusters/{name}/",
        "/api/v1/clusters/{name}/check/",
        "/api/v1/clusters/{cluster}/actions/",
        "/api/v1/clusters/{cluster}/actions/{id}/",
        "/api/v1/clusters/{cluster}/clusterissuers/{name}/events/",
        f"{NS}/certificates/{{name}}/renew/",
        f"{NS}/certificaterequests/{{name}}/approve/",
        f"{NS}/certificaterequests/{{name}}/deny/",
        f"{NS}/orders/{{name}}/events/",
        f"{NS}/challenges/{{name}}/",
        f"{NS}/issuers/",
    } <= paths
    for plural in ("certificates", "certificaterequests", "issuers", "orders", "challenges"):
        assert f"/api/v1/clusters/{{cluster}}/{plural}/" in paths
        # A name is unique in a namespace only: no detail without one.
        assert f"/api/v1/clusters/{{cluster}}/{plural}/{{name}}/" not in paths
    assert f"{NS}/orders/{{name}}/renew/" not in paths
    renew = schema["paths"][f"{NS}/certificates/{{name}}/renew/"]["post"]["responses"]
    assert {"202", "403", "404", "409"} <= set(renew)


def test_components(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]
    assert "kubeconfig" not in components["Cluster"]["properties"]
    request = components["ClusterWriteRequest"]
    assert request["properties"]["kubeconfig"]["writeOnly"] is True
    assert request["additionalProperties"] is False
    certificate = components["MirroredCertificate"]["properties"]
    assert certificate["nextRetryTime"]["nullable"] is True
    assert {"renewalTime", "spec", "status", "metadata"} <= set(certificate)
    assert "nextRetryTime" not in components["MirroredObject"]["properties"]


def test_path_parameters(schema: dict[str, Any]) -> None:
    params = {
        p["name"]: p["schema"]
        for p in schema["paths"][f"{NS}/certificates/{{name}}/"]["get"]["parameters"]
    }
    assert params["cluster"]["pattern"].startswith("^(-|")
    assert params["namespace"]["maxLength"] == 63
    listing = schema["paths"]["/api/v1/clusters/{cluster}/certificates/"]["get"]["parameters"]
    assert {"namespace", "ready", "issuer", "limit"} <= {p["name"] for p in listing}
