"""What the schema states for issuance webhooks, the token endpoint, download tokens and the
bootstrap API is what the API enforces: a body the schema calls valid is accepted (or
refused only for a reason the operation's description gives), one it calls invalid is a 400
naming the field, and nothing is stored."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.bootstrap.tokens import create_token
from issuance.models import CertificateRequest, IssuanceWebhook
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key
from tests.factories import make_ca_issuer

pytestmark = pytest.mark.django_db

Clients = Callable[[User | None], APIClient]
SECRET = "a-webhook-secret-of-some-length"
CONTRACT_CONFIG = Path(__file__).parents[1] / "contract" / "schemathesis.toml"


@pytest.fixture
def schema(db: None) -> dict[str, Any]:
    answer = APIClient().get("/api/schema/?format=json")
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


def json_schema(node: Any) -> Any:
    """OpenAPI 3.0's `nullable: true` as JSON Schema says it (a "null" type beside the other)."""
    if isinstance(node, list):
        return [json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") is True and isinstance(node.get("type"), str):
        out["type"] = [node["type"], "null"]
    return out


def component_validator(schema: dict[str, Any], name: str) -> jsonschema.Draft7Validator:
    """A validator for one component, its $refs resolved in the schema it came from."""
    root = {"$ref": f"#/components/schemas/{name}", "components": schema["components"]}
    return jsonschema.Draft7Validator(json_schema(root))


def pattern_matches(pattern: str, value: str) -> bool:
    """JSON Schema's `pattern`: an ECMA-262 search, where `$` (no multiline flag) is the end of
    the text; Python's `$` also matches before a final newline, `\\Z` does not."""
    return re.search(re.sub(r"\$$", r"\\Z", pattern), value) is not None


# Valid and invalid for Django's URLValidator (which the model keeps) and for the schema.
GOOD_URLS = [
    "https://deploy.example.test/hooks/certificates",
    "http://localhost:8080/hook?x=1#frag",
    "https://user:p%40ss@hooks.example.com:443/",
    "http://192.168.0.10/",
    "http://[2001:db8::1]:8443/hook",
    "https://xn--bcher-kva.example/",
    "https://example.com.",
]
BAD_URLS = [
    "0",
    "ftp://example.com/",
    "http://deploy/hook",  # no top-level domain
    "http://999.1.1.1/",
    "http://example.com:65536/",
    "http://example.com/a b",
    "http://[::1/",
    " https://example.com/",
    "https://example.com/\n",
    "http://-bad-.example.com/",
]


@pytest.mark.parametrize("url", GOOD_URLS + BAD_URLS)
def test_a_webhook_url_is_accepted_exactly_when_the_schema_says_so(
    url: str, schema: dict[str, Any], role_users: dict[str, User], api_client_for: Clients
) -> None:
    field = schema["components"]["schemas"]["IssuanceWebhookWriteRequest"]["properties"]["url"]
    schema_valid = pattern_matches(field["pattern"], url)
    assert schema_valid == (url in GOOD_URLS)
    body = {"name": "deploy", "url": url, "secret": SECRET}
    answer = api_client_for(role_users["admin"]).post(
        "/api/v1/issuance-webhooks/", body, format="json"
    )
    if schema_valid:
        assert answer.status_code == 201, answer.content
        assert IssuanceWebhook.objects.get().url == url
    else:
        assert answer.status_code == 400, answer.content
        assert list(answer.json()) == ["url"]
        assert not IssuanceWebhook.objects.exists()


def test_the_token_body_states_the_username_length(
    schema: dict[str, Any], make_user: Callable[..., User]
) -> None:
    body = schema["components"]["schemas"]["ObtainTokenRequest"]
    assert body["required"] == ["password", "username"]
    stored = User._meta.get_field("username").max_length
    assert body["properties"]["username"]["maxLength"] == stored == 150
    operation = schema["paths"]["/api/v1/token/"]["post"]
    assert "400" in operation["description"]
    make_user("alice")
    too_long = APIClient().post(
        "/api/v1/token/", {"username": "a" * 151, "password": "x"}, format="json"
    )
    assert too_long.status_code == 400 and list(too_long.json()) == ["username"]
    wrong = APIClient().post(
        "/api/v1/token/", {"username": "alice", "password": "x"}, format="json"
    )
    assert wrong.status_code == 400 and list(wrong.json()) == ["non_field_errors"]


def test_a_download_token_for_a_missing_certificate_is_described_and_refused(
    schema: dict[str, Any], role_users: dict[str, User], api_client_for: Clients
) -> None:
    operation = schema["paths"]["/api/v1/downloadtokens/"]["post"]
    assert "must exist" in operation["description"]
    answer = api_client_for(role_users["operator"]).post(
        "/api/v1/downloadtokens/", {"name": "laptop", "certificate": "nope"}, format="json"
    )
    assert answer.status_code == 400 and list(answer.json()) == ["certificate"]


def csr() -> str:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    return build_csr(key, {"commonName": "node-1", "dnsNames": ["node-1.example.test"]})


@pytest.mark.parametrize(
    ("choice", "schema_valid", "error"),
    [
        ({"issuerRef": {"name": "node-ca"}}, True, None),
        ({"issuerRef": {"name": "node-ca"}, "signerName": None}, True, None),
        ({"issuerRef": {"name": "node-ca"}, "signerName": "example.com/x"}, False, "signerName"),
        ({}, False, "issuerRef"),
        ({"signerName": None}, False, "issuerRef"),
    ],
)
def test_a_submission_names_issuer_ref_or_signer_name_as_the_schema_says(
    choice: dict[str, Any], schema_valid: bool, error: str | None, schema: dict[str, Any]
) -> None:
    make_ca_issuer("node-ca", "node-ca-secret")
    body = {"request": csr(), **choice}
    validator = component_validator(schema, "BootstrapSubmitRequest")
    assert validator.is_valid(body) == schema_valid
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {create_token(actor='admin')[1]}")
    answer = client.post("/api/v1/bootstrap/certificaterequests/", body, format="json")
    if schema_valid:
        assert answer.status_code == 201, answer.content
    else:
        assert answer.status_code == 400, answer.content
        assert list(answer.json()) == [error]
        assert not CertificateRequest.objects.exists()


def test_the_submission_description_says_what_is_checked_beyond_the_schema(
    schema: dict[str, Any],
) -> None:
    description = schema["paths"]["/api/v1/bootstrap/certificaterequests/"]["post"]["description"]
    assert "issuerRef.name" in description and "signerName" in description
    assert "400" in description and "429" in description


def test_the_contract_run_allows_a_400_only_to_operations_that_say_why(
    schema: dict[str, Any],
) -> None:
    """Every operation in schemathesis.toml's positive_data_acceptance list exists (a renamed
    path would silently leave its override behind); those of this part describe the 400."""
    config = tomllib.loads(CONTRACT_CONFIG.read_text())
    listed: list[str] = []
    for block in config.get("operations", []):
        names = block["include-name"]
        listed += [names] if isinstance(names, str) else names
        statuses = block["checks"]["positive_data_acceptance"]["expected-statuses"]
        assert "400" in statuses
    assert len(listed) == len(set(listed))
    operations = {
        f"{method.upper()} {path}": op
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "responses" in op
    }
    assert set(listed) <= set(operations)
    mine = [n for n in listed if "/clusters/" in n or "/bootstrap/" in n or n.endswith("token/")]
    mine += [n for n in listed if "downloadtokens" in n]
    assert len(mine) == 6
    for name in mine:
        assert "400" in operations[name]["description"], name
