"""Bad input: a 4xx naming the field, and nothing stored."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import Encoding
from cryptography.x509 import load_pem_x509_csr
from django.conf import settings
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.models import Certificate
from tests.api.conftest import counts
from tests.factories import csr_pem


@pytest.fixture
def operator(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["operator"])


@pytest.fixture
def admin(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    """Issuers are changed by admins (issuance.access.permissions)."""
    return api_client_for(role_users["admin"])


def cert_body(**spec: Any) -> dict[str, Any]:
    return {
        "name": "bad",
        "spec": {"dnsNames": ["ok.example.test"], "issuerRef": {"name": "ss"}, **spec},
    }


LONG_NAME = ".".join(["a" * 60] * 4) + ".example.test"  # 258 characters
assert len(LONG_NAME) > 253

CERTIFICATE_CASES = [
    ("invalid-underscore", {"dnsNames": ["bad_name.example.test"]}, "spec.dnsNames[0]", "letters"),
    ("invalid-leading-dash", {"dnsNames": ["ok.test", "-a.test"]}, "spec.dnsNames[1]", "'-'"),
    ("invalid-empty-label", {"dnsNames": ["a..example.test"]}, "spec.dnsNames[0]", "empty label"),
    ("invalid-space", {"dnsNames": ["ex ample.test"]}, "spec.dnsNames[0]", "letters"),
    ("invalid-inner-wildcard", {"dnsNames": ["a.*.test"]}, "spec.dnsNames[0]", "wildcard"),
    ("invalid-unicode", {"dnsNames": ["bücher.test"]}, "spec.dnsNames[0]", "xn--"),
    ("invalid-not-a-string", {"dnsNames": [42]}, "spec.dnsNames[0]", "string"),
    ("duplicate", {"dnsNames": ["a.test", "b.test", "A.TEST"]}, "spec.dnsNames[2]", "duplicate"),
    ("too-long", {"dnsNames": [LONG_NAME]}, "spec.dnsNames[0]", "253"),
    ("label-too-long", {"dnsNames": ["a" * 64 + ".test"]}, "spec.dnsNames[0]", "63"),
    ("ipv4-in-dnsnames", {"dnsNames": ["10.0.0.1"]}, "spec.dnsNames[0]", "ipAddresses"),
    ("ipv6-in-dnsnames", {"dnsNames": ["::1"]}, "spec.dnsNames[0]", "ipAddresses"),
    ("bad-ip", {"ipAddresses": ["10.0.0.300"]}, "spec.ipAddresses[0]", "IPv4"),
    ("negative-duration", {"duration": "-1h"}, "spec.duration", "greater than zero"),
    ("zero-duration", {"duration": "0s"}, "spec.duration", "greater than zero"),
    ("garbage-duration", {"duration": "90 days"}, "spec.duration", "invalid duration"),
    ("zero-renew-before", {"renewBefore": "0"}, "spec.renewBefore", "greater than zero"),
    (
        "renew-before-equals-duration",
        {"duration": "24h", "renewBefore": "1440m"},
        "spec.renewBefore",
        "less than duration",
    ),
    (
        "renew-before-longer",
        {"duration": "24h", "renewBefore": "48h"},
        "spec.renewBefore",
        "less than duration",
    ),
    (
        "both-renew-fields",
        {"renewBefore": "1h", "renewBeforePercentage": 10},
        "spec.renewBeforePercentage",
        "exclusive",
    ),
    ("percentage-range", {"renewBeforePercentage": 100}, "spec.renewBeforePercentage", "99"),
    ("unknown-issuer", {"issuerRef": {"name": "nope"}}, "spec.issuerRef.name", "unknown issuer"),
    (
        "issuer-kind",
        {"issuerRef": {"name": "ss", "kind": "Vault"}},
        "spec.issuerRef.kind",
        "ClusterIssuer",
    ),
    ("no-issuer", {"issuerRef": None}, "spec.issuerRef", "is required"),
    (
        "rsa-size",
        {"privateKey": {"algorithm": "RSA", "size": 1024}},
        "spec.privateKey.size",
        "2048",
    ),
    (
        "ecdsa-size",
        {"privateKey": {"algorithm": "ECDSA", "size": 2048}},
        "spec.privateKey.size",
        "256",
    ),
    ("algorithm", {"privateKey": {"algorithm": "DSA"}}, "spec.privateKey.algorithm", "Ed25519"),
    (
        "rotation",
        {"privateKey": {"rotationPolicy": "Sometimes"}},
        "spec.privateKey.rotationPolicy",
        "Never",
    ),
    ("usage", {"usages": ["server auth", "world domination"]}, "spec.usages[1]", "unknown usage"),
    ("common-name", {"commonName": "c" * 65}, "spec.commonName", "64"),
    ("history", {"revisionHistoryLimit": 0}, "spec.revisionHistoryLimit", "at least 1"),
    ("unsupported-field", {"literalSubject": "CN=x"}, "spec.literalSubject", "unsupported field"),
    (
        "other-name-oid",
        {"otherNames": [{"oid": "upn", "utf8Value": "u"}]},
        "spec.otherNames[0].oid",
        "object identifier",
    ),
    (
        "constraints-need-ca",
        {"nameConstraints": {"permitted": {"dnsDomains": ["example.com"]}}},
        "spec.nameConstraints",
        "isCA",
    ),
    ("keystore", {"keystores": {"jks": {}}}, "spec.keystores.jks.create", "is required"),
    ("secret-name", {"secretName": "Not_Valid"}, "spec.secretName", "lowercase"),
    ("no-names", {"dnsNames": []}, "spec", "at least one of"),
    # null is no value: a required field given as null is missing, not skipped
    ("null-issuer-name", {"issuerRef": {"name": None}}, "spec.issuerRef.name", "is required"),
]


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [pytest.param(*c[1:], id=c[0]) for c in CERTIFICATE_CASES],
)
def test_bad_certificate_spec(
    world: dict[str, Any], operator: APIClient, spec: dict[str, Any], field: str, message: str
) -> None:
    before = counts()
    response = operator.post("/api/v1/certificates/", cert_body(**spec), format="json")
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert any(message in m for m in errors[field]), errors[field]
    assert counts() == before


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [pytest.param(*c[1:], id=c[0]) for c in CERTIFICATE_CASES],
)
def test_bad_certificate_update_changes_nothing(
    world: dict[str, Any], operator: APIClient, spec: dict[str, Any], field: str, message: str
) -> None:
    cert = Certificate.objects.get(name="web")
    before = counts()
    body = {"spec": cert_body(**spec)["spec"]}
    response = operator.put("/api/v1/certificates/web/", body, format="json")
    assert response.status_code == 400
    assert field in response.json()
    after = Certificate.objects.get(name="web")
    assert (after.spec, after.generation, after.issuer_id) == (
        cert.spec,
        cert.generation,
        cert.issuer_id,
    )
    assert counts() == before


def test_all_problems_are_reported_at_once(world: dict[str, Any], operator: APIClient) -> None:
    response = operator.post(
        "/api/v1/certificates/",
        cert_body(dnsNames=["ok.test", "ok.test", "1.2.3.4"], duration="-5m"),
        format="json",
    )
    assert response.status_code == 400
    assert {"spec.dnsNames[1]", "spec.dnsNames[2]", "spec.duration"} <= set(response.json())


def test_bad_resource_name(world: dict[str, Any], operator: APIClient) -> None:
    before = counts()
    body = cert_body()
    body["name"] = "Bad_Name"
    response = operator.post("/api/v1/certificates/", body, format="json")
    assert response.status_code == 400
    assert "name" in response.json()
    assert counts() == before


def _tampered_csr() -> str:
    """A well-formed CSR whose signature no longer matches (a SAN byte was changed)."""
    der = load_pem_x509_csr(csr_pem("ext.example.test").encode()).public_bytes(Encoding.DER)
    tampered = der.replace(b"ext.example.test", b"evil.example.tst"[:16])
    assert tampered != der and len(tampered) == len(der)
    body = base64.encodebytes(tampered).decode()
    return f"-----BEGIN CERTIFICATE REQUEST-----\n{body}-----END CERTIFICATE REQUEST-----\n"


@pytest.mark.parametrize(
    ("request_pem", "message"),
    [
        pytest.param("not a csr", "CERTIFICATE REQUEST", id="not-pem"),
        pytest.param(
            "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n",
            "malformed",
            id="malformed-pem",
        ),
        pytest.param(
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
            "CERTIFICATE REQUEST",
            id="wrong-block",
        ),
        pytest.param(_tampered_csr(), "signature", id="signature-mismatch"),
        pytest.param("", "required", id="empty"),
    ],
)
def test_bad_csr(
    world: dict[str, Any], operator: APIClient, request_pem: str, message: str
) -> None:
    before = counts()
    response = operator.post(
        "/api/v1/certificaterequests/",
        {"spec": {"request": request_pem, "issuerRef": {"name": "ca"}}},
        format="json",
    )
    assert response.status_code == 400, response.content
    errors = response.json()
    assert "spec.request" in errors, errors
    assert any(message in m for m in errors["spec.request"]), errors
    assert counts() == before


def test_bad_certificate_request_fields(world: dict[str, Any], operator: APIClient) -> None:
    before = counts()
    response = operator.post(
        "/api/v1/certificaterequests/",
        {
            "spec": {
                "request": csr_pem(),
                "issuerRef": {"name": "missing"},
                "expirationSeconds": 60,
                "usages": ["bogus"],
            }
        },
        format="json",
    )
    assert response.status_code == 400
    assert {"spec.issuerRef.name", "spec.expirationSeconds", "spec.usages[0]"} <= set(
        response.json()
    )
    assert counts() == before


@pytest.mark.parametrize(
    ("url", "make_body"),
    [
        ("/api/v1/certificates/", lambda pad: cert_body(commonName=pad)),
        ("/api/v1/issuers/", lambda pad: {"name": "big", "spec": {"selfSigned": {"x": pad}}}),
        (
            "/api/v1/certificaterequests/",
            lambda pad: {"spec": {"request": pad, "issuerRef": {"name": "ca"}}},
        ),
        ("/api/v1/certificates/web/", lambda pad: cert_body(commonName=pad)),
    ],
)
def test_oversized_body_is_413(
    world: dict[str, Any],
    operator: APIClient,
    admin: APIClient,
    url: str,
    make_body: Callable[[str], Any],
) -> None:
    before = counts()
    pad = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 10)
    client = admin if "/issuers/" in url else operator
    method = client.put if url.endswith("web/") else client.post
    response = method(url, make_body(pad), format="json")
    assert response.status_code == 413
    assert "larger than the limit" in response.json()["detail"]
    assert counts() == before


def test_malformed_json_and_wrong_media_type(world: dict[str, Any], operator: APIClient) -> None:
    before = counts()
    bad = operator.post("/api/v1/certificates/", "{not json", content_type="application/json")
    assert bad.status_code == 400
    form = operator.post("/api/v1/certificates/", "name=x", content_type="text/plain")
    assert form.status_code == 415
    assert counts() == before


ISSUER_CASES = [
    ("no-kind", {}, "spec", "exactly one of acme, ca or selfSigned"),
    ("two-kinds", {"ca": {"generate": True}, "selfSigned": {}}, "spec", "exactly one"),
    ("vault", {"vault": {"server": "https://v"}}, "spec.vault", "unsupported field"),
    ("acme-http-server", {"acme": {"server": "http://acme.test/dir"}}, "spec.acme.server", "https"),
    ("acme-no-server", {"acme": {"email": "a@b.test"}}, "spec.acme.server", "required"),
    ("acme-null-server", {"acme": {"server": None}}, "spec.acme.server", "required"),
    ("ca-null-secret", {"ca": {"secretName": None}}, "spec.ca.secretName", "required"),
    (
        "acme-email",
        {"acme": {"server": "https://a.test", "email": "nope"}},
        "spec.acme.email",
        "e-mail",
    ),
    (
        "acme-acmedns",
        {"acme": {"server": "https://a.test", "solvers": [{"dns01": {"acmeDNS": {}}}]}},
        "spec.acme.solvers[0].dns01.acmeDNS",
        "no acme-dns provider",
    ),
    (
        "acme-ingress-unknown-key",
        {
            "acme": {
                "server": "https://a.test",
                "solvers": [{"http01": {"ingress": {"ingressClass": "nginx"}}}],
            }
        },
        "spec.acme.solvers[0].http01.ingress.ingressClass",
        "unsupported field",
    ),
    (
        "acme-tsig-algorithm",
        {
            "acme": {
                "server": "https://a.test",
                "solvers": [
                    {"dns01": {"rfc2136": {"nameserver": "127.0.0.1:53", "tsigAlgorithm": "MD4"}}}
                ],
            }
        },
        "spec.acme.solvers[0].dns01.rfc2136.tsigAlgorithm",
        "HMACSHA256",
    ),
    (
        "acme-selector-labels",
        {
            "acme": {
                "server": "https://a.test",
                "solvers": [{"selector": {"matchLabels": {"bad key": "x"}}, "http01": {}}],
            }
        },
        "spec.acme.solvers[0].selector.matchLabels[bad key]",
        "the name must be",
    ),
    (
        "acme-cabundle",
        {"acme": {"server": "https://a.test", "caBundle": base64.b64encode(b"junk").decode()}},
        "spec.acme.caBundle",
        "CERTIFICATE",
    ),
    (
        "acme-eab-both",
        {
            "acme": {
                "server": "https://a.test",
                "externalAccountBinding": {
                    "keyID": "k",
                    "hmacKey": "aGVsbG8",
                    "keySecretRef": {"name": "s", "key": "k"},
                },
            }
        },
        "spec.acme.externalAccountBinding",
        "exactly one",
    ),
    (
        "ca-crl",
        {"ca": {"generate": True, "crlDistributionPoints": ["x"]}},
        "spec.ca.crlDistributionPoints",
        "CRL",
    ),
    (
        "ca-bad-cert",
        {"ca": {"certificate": "junk", "privateKey": "junk"}},
        "spec.ca.certificate",
        "PEM",
    ),
    (
        "max-duration",
        {"selfSigned": {"maxDuration": "-1h"}},
        "spec.selfSigned.maxDuration",
        "greater than zero",
    ),
    (
        "approval",
        {"selfSigned": {}, "approvalPolicy": {"autoApprove": "sometimes"}},
        "spec.approvalPolicy.autoApprove",
        "owned",
    ),
]


@pytest.mark.parametrize(
    ("spec", "field", "message"), [pytest.param(*c[1:], id=c[0]) for c in ISSUER_CASES]
)
def test_bad_issuer_spec(
    world: dict[str, Any], admin: APIClient, spec: dict[str, Any], field: str, message: str
) -> None:
    before = counts()
    response = admin.post("/api/v1/issuers/", {"name": "bad", "spec": spec}, format="json")
    assert response.status_code == 400, response.content
    errors = response.json()
    assert field in errors, errors
    assert any(message in m for m in errors[field]), errors[field]
    assert counts() == before


def test_ca_key_must_match_certificate(world: dict[str, Any], admin: APIClient) -> None:
    from tests.api.test_contract import _inline_ca

    cert_a, _ = _inline_ca()
    _, key_b = _inline_ca()
    before = counts()
    response = admin.post(
        "/api/v1/issuers/",
        {"name": "mismatch", "spec": {"ca": {"certificate": cert_a, "privateKey": key_b}}},
        format="json",
    )
    assert response.status_code == 400
    assert "does not match" in response.json()["spec.ca.privateKey"][0]
    assert counts() == before
