"""The cluster-mode API in the OpenAPI schema: every path, the kubeconfig write-only, the
Certificate's computed retry, the path parameters' patterns; what the cluster bodies' schema
states (required fields, the kubeconfig's format and pattern) is what the API enforces, and
what it cannot state, the operations describe."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import yaml
from rest_framework.test import APIClient

from issuance.models import Cluster
from tests.factories import scoped_user

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


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: schema-test}}]
contexts: [{name: main, context: {cluster: c, user: u}}]
current-context: main
"""


@pytest.fixture
def admin(db: None) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=scoped_user("root", "admin"))
    return client


def test_adding_a_cluster_requires_name_and_kubeconfig(
    schema: dict[str, Any], admin: APIClient
) -> None:
    components = schema["components"]["schemas"]
    assert components["ClusterCreateRequest"]["required"] == ["kubeconfig", "name"]
    assert "required" not in components["PatchedClusterWriteRequest"]
    post = schema["paths"]["/api/v1/clusters/"]["post"]["requestBody"]["content"]
    assert post["application/json"]["schema"]["$ref"].endswith("/ClusterCreateRequest")
    answer = admin.post("/api/v1/clusters/", {"kubeconfig": KUBECONFIG}, format="json")
    assert answer.status_code == 400 and list(answer.json()) == ["name"]
    assert not Cluster.objects.exists()


@pytest.mark.parametrize(
    ("kubeconfig", "matches", "field"),
    [
        ("0", False, "kubeconfig"),
        ("apiVersion: v1\nkind: Config\n", False, "kubeconfig"),
        (KUBECONFIG, True, None),
        # JSON is YAML too, and says `"clusters":`.
        (json.dumps(yaml.safe_load(KUBECONFIG)), True, None),
        # The pattern's key, but not a kubeconfig that loads: the description's 400s.
        ("clusters: [}", True, "kubeconfig"),
        ("clusters: [{name: c}]\ncontexts: [{name: main}]\ncurrent-context: main", True, "context"),
    ],
)
def test_a_kubeconfig_the_pattern_refuses_is_a_400_and_one_it_takes_must_load(
    kubeconfig: str, matches: bool, field: str | None, schema: dict[str, Any], admin: APIClient
) -> None:
    stated = schema["components"]["schemas"]["ClusterCreateRequest"]["properties"]["kubeconfig"]
    assert stated["format"] == "kubeconfig" and stated["writeOnly"] is True
    assert "must load" in stated["description"]
    # JSON Schema's `pattern` is a search, as the API's check.
    assert (re.search(stated["pattern"], kubeconfig) is not None) == matches
    answer = admin.post(
        "/api/v1/clusters/", {"name": "edge", "kubeconfig": kubeconfig}, format="json"
    )
    if field is None:
        assert answer.status_code == 201, answer.content
        assert Cluster.objects.get().name == "edge"
    else:
        assert answer.status_code == 400, answer.content
        assert list(answer.json()) == [field]
        assert not Cluster.objects.exists()


def test_what_the_schema_cannot_say_the_operations_describe(
    schema: dict[str, Any], admin: APIClient
) -> None:
    for method, path in (
        ("post", "/api/v1/clusters/"),
        ("put", "/api/v1/clusters/{name}/"),
        ("patch", "/api/v1/clusters/{name}/"),
    ):
        description = schema["paths"][path][method]["description"]
        assert "context" in description and "maxBackoffSeconds" in description, path
    body: dict[str, Any] = {"name": "edge", "kubeconfig": KUBECONFIG, "context": "elsewhere"}
    answer = admin.post("/api/v1/clusters/", body, format="json")
    assert answer.status_code == 400 and list(answer.json()) == ["context"]
    body = {"name": "edge", "kubeconfig": KUBECONFIG, "minBackoffSeconds": 60}
    answer = admin.post("/api/v1/clusters/", {**body, "maxBackoffSeconds": 59}, format="json")
    assert answer.status_code == 400 and list(answer.json()) == ["maxBackoffSeconds"]
    assert not Cluster.objects.exists()
    assert admin.post("/api/v1/clusters/", body, format="json").status_code == 201
    lower = admin.patch("/api/v1/clusters/edge/", {"maxBackoffSeconds": 30}, format="json")
    assert lower.status_code == 400 and list(lower.json()) == ["maxBackoffSeconds"]
    assert Cluster.objects.get().max_backoff_seconds == 115200


def test_an_action_id_is_a_uuid(schema: dict[str, Any], admin: APIClient) -> None:
    params = schema["paths"]["/api/v1/clusters/{cluster}/actions/{id}/"]["get"]["parameters"]
    assert {"type": "string", "format": "uuid"} in [p["schema"] for p in params]
    ns = schema["paths"][f"{NS}/orders/{{name}}/"]["get"]["parameters"]
    examples = [p["examples"] for p in ns if p["name"] == "name"]
    assert [[e["value"] for e in found.values()] for found in examples] == [["web"]]
