"""The OpenAPI schema's spec shapes and the spec validators agree.

Both directions, as schemathesis checks them against the served API: a spec generated from
the schema is accepted by its validator (apart from the rules JSON Schema cannot state, each
listed below with why), and a spec the validator accepts fits the schema (schemathesis's
schema-invalid bodies are refused). The validators run without database lookups (a spec
naming an issuer that does not exist is the one refusal the schema leaves open; a Secret
that does not exist yet is no refusal: the Issuer waits for it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
import schemathesis
from django.contrib.auth.models import User
from hypothesis import HealthCheck, given, settings
from rest_framework.test import APIClient
from schemathesis import GenerationMode

from issuance.models import Certificate, Issuer
from issuance.specs.certificate import validate_certificate_spec
from issuance.specs.certificaterequest import validate_request_spec
from issuance.specs.errors import SpecError
from issuance.specs.issuer import validate_issuer_spec
from tests.factories import csr_pem, make_ca_secret

Validator = Callable[[Any], object]
VALIDATORS: dict[str, Validator] = {
    "CertificateSpec": lambda spec: validate_certificate_spec("web", spec, issuer_exists=None),
    "IssuerSpec": lambda spec: validate_issuer_spec("issuer", spec, lookups=False),
    "CertificateRequestSpec": lambda spec: validate_request_spec(spec, issuer_exists=None),
}
OPERATIONS = {
    "CertificateSpec": "/api/v1/certificates/",
    "IssuerSpec": "/api/v1/issuers/",
    "CertificateRequestSpec": "/api/v1/certificaterequests/",
}

# What a schema-valid spec may still be refused for: (field path, message) patterns, each a
# rule JSON Schema cannot state (issuance/api/spec_schemas.py lists them for the reader).
NOT_EXPRESSIBLE: list[tuple[str, str, str]] = [
    (r"", r"too long \(more than 100 years\)", "a duration's upper bound"),
    (r"", r"must be at least 1s|must be greater than zero", "0.5s500ms: parts below 1s"),
    (r"renewBefore$", r"must be less than duration", "compares two fields' values"),
    (r"", r"duplicate", "equal once normalized (case, IPv6 forms) or by one key"),
    (r"\.cron$", r"", "cron grammar"),
    (r"caBundle$", r"base64|PEM", "PEM that parses"),
    (r"\.ca\.(certificate|privateKey)$", r"", "PEM that parses and matches"),
    (r"(hmacKey|tsigSecret)$", r"base64", "base64 padding"),
    (r"Pattern$|Regex$", r"not a valid regular expression", "Python regex grammar"),
    (r"(ipSanCidrs|ipRanges)\[\d+\]$", r"not a CIDR", "address arithmetic"),
    (r"nameConstraints$", r"isCA", "one field's presence requires another's value"),
    (r"nameConstraints$", r"permitted or excluded", "a name in either of two objects' lists"),
    (r"secretTemplate\.(labels|annotations)", r"", "Kubernetes' key syntax (map keys)"),
    (r"selector\.matchLabels\[", r"the (prefix|name)", "Kubernetes' key syntax (map keys)"),
    (r"nameConstraints\.", r"must be at most 253", "a domain's length without its leading dot"),
    (r"uris\[\d+\]$", r"URI", "RFC 3986 parsing"),
    (r"emailAddresses\[\d+\]$|email$", r"domain must be at most", "the domain's own length"),
    (r"nameserver$", r"host:port", "port range 1-65535"),
    (r"fallback\[\d+\]\.server$", r"already listed", "unique across two fields"),
    (r"\.lexicon\.", r"option", "each dns-lexicon provider's own options"),
    (r"(server|url|crlDistributionPoint)$", r"://\[", "an IPv6 address literal's grammar"),
]


def not_expressible(path: str, message: str) -> bool:
    return any(re.search(p, path) and re.search(m, message) for p, m, _why in NOT_EXPRESSIBLE)


@pytest.fixture
def operator(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    return api_client_for(role_users["operator"])


def to_json_schema(value: Any) -> Any:
    """OpenAPI 3.0's dialect as JSON Schema (draft 7): nullable → null allowed."""
    if isinstance(value, list):
        return [to_json_schema(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {k: to_json_schema(v) for k, v in value.items() if k not in ("nullable", "readOnly")}
    if "$ref" in out:
        out["$ref"] = out["$ref"].replace("#/components/schemas/", "#/definitions/")
    if value.get("nullable"):
        out = {"anyOf": [out, {"type": "null"}]}
    return out


@pytest.fixture(scope="module")
def openapi(django_db_blocker: Any) -> dict[str, Any]:
    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    return dict(json.loads(response.content))


def validator_for(openapi: dict[str, Any], component: str) -> jsonschema.Draft7Validator:
    schema = to_json_schema(openapi["components"]["schemas"][component])
    schema["definitions"] = to_json_schema(openapi["components"]["schemas"])
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())


def bodies(openapi: dict[str, Any], component: str, mode: GenerationMode) -> Any:
    operation = schemathesis.openapi.from_dict(openapi)[OPERATIONS[component]]["POST"]
    return operation.as_strategy(generation_mode=mode)


def refusals(component: str, spec: Any) -> list[tuple[str, str]]:
    try:
        VALIDATORS[component](spec)
    except SpecError as exc:
        return exc.errors
    return []


EXAMPLES = settings(
    max_examples=60,
    derandomize=True,  # the same bodies every run
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.parametrize("component", sorted(VALIDATORS))
def test_specs_generated_from_the_schema_are_accepted(
    openapi: dict[str, Any], component: str
) -> None:
    csr = csr_pem()
    seen: list[int] = []

    @EXAMPLES
    @given(bodies(openapi, component, GenerationMode.POSITIVE))
    def check(case: Any) -> None:
        spec = case.body["spec"]
        if component == "CertificateRequestSpec":
            spec = {**spec, "request": csr}  # a CSR that parses: not a JSON Schema rule
        wrong = [(p, m) for p, m in refusals(component, spec) if not not_expressible(p, m)]
        assert wrong == [], json.dumps(spec)[:2000]
        seen.append(1)

    check()
    assert len(seen) >= 30  # the strategy did generate specs


@pytest.mark.parametrize("component", sorted(VALIDATORS))
def test_schema_invalid_specs_are_refused(openapi: dict[str, Any], component: str) -> None:
    """What schemathesis's negative phase sends: a spec outside the schema is refused."""
    schema = validator_for(openapi, component)
    invalid: list[int] = []

    @EXAMPLES
    @given(bodies(openapi, component, GenerationMode.NEGATIVE))
    def check(case: Any) -> None:
        body = case.body
        if not isinstance(body, dict) or "spec" not in body:
            return
        if next(schema.iter_errors(body["spec"]), None) is None:
            return  # the body is invalid elsewhere (name, kind, metadata)
        invalid.append(1)
        assert refusals(component, body["spec"]), json.dumps(body["spec"])[:2000]

    check()
    assert invalid  # some specs were outside the schema


def pem_pair() -> tuple[str, str]:
    secret = make_ca_secret("inline-ca")
    return secret.tls_crt, secret.tls_key


# Specs as users write them (the docs, cert-manager manifests); each must fit the schema and
# pass its validator.
VALID: list[tuple[str, dict[str, Any]]] = [
    ("IssuerSpec", {"selfSigned": {}}),
    ("IssuerSpec", {"selfSigned": None, "approvalPolicy": {"autoApprove": "owned"}}),
    ("IssuerSpec", {"ca": {"generate": True, "commonName": "Lab CA", "maxDuration": "720h"}}),
    ("IssuerSpec", {"ca": {"secretName": "ca-key-pair", "crlDistributionPoint": "http://x/c"}}),
    (
        "IssuerSpec",
        {
            "acme": {
                "server": "https://acme-staging-v02.api.letsencrypt.org/directory",
                "email": "ops@example.com",
                "privateKeySecretRef": {"name": "le-account"},
                "externalAccountBinding": {"keyID": "kid-1", "hmacKey": "c2VjcmV0"},
                "solvers": [
                    {"http01": {"ingress": {}}},
                    {
                        "selector": {"dnsZones": ["example.com"]},
                        "dns01": {
                            "rfc2136": {
                                "nameserver": "[2001:db8::53]:53",
                                "tsigKeyName": "acme",
                                "tsigAlgorithm": "HMACSHA256",
                                "tsigSecret": "c2VjcmV0",
                            }
                        },
                    },
                    {"dns01": {"cloudflare": {"apiToken": "token"}}},
                    {
                        "dns01": {
                            "cloudflare": {
                                "email": "ops@example.com",
                                "apiKeySecretRef": {"name": "cf", "key": "api-key"},
                            }
                        }
                    },
                    {"dns01": {"digitalocean": {"tokenSecretRef": {"name": "do", "key": "t"}}}},
                    {"dns01": {"webhook": {"url": "http://127.0.0.1:8080/present"}}},
                    # cert-manager's forms stored and reported not usable here
                    # (tests/cli/manifests/dns01-ambient-forms.yaml).
                    {"dns01": {"webhook": {"groupName": "acme.example", "solverName": "s"}}},
                    {"dns01": {"cloudDNS": {"project": "p"}}},
                    {
                        "dns01": {
                            "azureDNS": {
                                "subscriptionID": "s",
                                "resourceGroupName": "g",
                                "managedIdentity": {"clientID": "c"},
                            }
                        }
                    },
                ],
                "fallback": [{"server": "https://acme.zerossl.com/v2/DV90"}],
            },
            "approvalPolicy": {
                "rules": {"maxDnsSans": 10, "ipSanCidrs": ["10.0.0.0/8"]},
                "deny": [{"name": "no-test", "dnsSanRegex": r"\.test$"}],
            },
        },
    ),
    (
        "CertificateSpec",
        {
            "secretName": "web-tls",
            "commonName": "web.example.com",
            "dnsNames": ["web.example.com", "*.Example.com"],
            "ipAddresses": ["192.0.2.1", "2001:db8::1"],
            "uris": ["spiffe://example.com/web"],
            "emailAddresses": ["ops@example.com"],
            "subject": {"organizations": ["Example"], "countries": ["DE"]},
            "duration": "2160h",
            "renewBefore": "360h",
            "issuerRef": {"name": "ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
            "privateKey": {"algorithm": "ECDSA", "size": 384, "rotationPolicy": "Always"},
            "usages": ["server auth", "digital signature"],
            "renewal": {"windows": {"cron": "0 2 * * 1-5", "windowDuration": "4h"}},
            "additionalOutputFormats": [{"type": "DER"}, {"type": "CombinedPEM"}],
            "keystores": {
                "pkcs12": {"create": True, "passwordSecretRef": {"name": "p", "key": "k"}}
            },
        },
    ),
    ("CertificateSpec", {"dnsNames": ["a.example"], "issuerRef": {"name": "ss"}, "duration": "1s"}),
    (
        "CertificateSpec",
        {"commonName": "x", "issuerRef": {"name": "ss"}, "privateKey": {"algorithm": "Ed25519"}},
    ),
    (
        "CertificateSpec",
        {"commonName": "x", "issuerRef": {"name": "ss"}, "renewBeforePercentage": 30},
    ),
    # cert-manager's documented HTTP-01 cluster settings: stored (and reported not usable).
    (
        "IssuerSpec",
        {
            "acme": {
                "server": "https://acme-v02.api.letsencrypt.org/directory",
                "solvers": [
                    {"http01": {"ingress": {"ingressClassName": "nginx"}}},
                    {
                        "http01": {
                            "ingress": {
                                "class": "nginx",
                                "name": "web",
                                "serviceType": "ClusterIP",
                                "podTemplate": {"spec": {"nodeSelector": {"a": "b"}}},
                                "ingressTemplate": {"metadata": {"annotations": {"x": "y"}}},
                            }
                        }
                    },
                    {
                        "http01": {
                            "gatewayHTTPRoute": {
                                "parentRefs": [
                                    {"name": "gw", "namespace": "gw", "kind": "Gateway"}
                                ],
                                "labels": {"app": "acme"},
                                "serviceType": "NodePort",
                            }
                        }
                    },
                ],
            }
        },
    ),
]
# Specs refused for their shape; each must be outside the schema too.
INVALID: list[tuple[str, dict[str, Any]]] = [
    ("IssuerSpec", {}),
    ("IssuerSpec", {"selfSigned": {}, "ca": {"generate": True}}),
    ("IssuerSpec", {"vault": {}}),
    ("IssuerSpec", {"ca": {}}),
    ("IssuerSpec", {"ca": {"secretName": "x", "commonName": "only with generate"}}),
    ("IssuerSpec", {"ca": {"generate": True, "certificate": "-----BEGIN x"}}),
    ("IssuerSpec", {"acme": {"email": "a@example.com"}}),
    ("IssuerSpec", {"acme": {"server": "http://plain.example/dir"}}),
    ("IssuerSpec", {"acme": {"server": "https://x.example", "solvers": [{}]}}),
    ("IssuerSpec", {"acme": {"server": "https://x", "solvers": [{"http01": {}, "dns01": {}}]}}),
    ("IssuerSpec", {"acme": {"server": "https://x", "solvers": [{"dns01": {"acmeDNS": {}}}]}}),
    ("IssuerSpec", {"acme": {"server": "https://x", "disableAccountKeyGeneration": True}}),
    (
        "IssuerSpec",
        {"acme": {"server": "https://x", "solvers": [{"http01": {"ingress": {"klass": "n"}}}]}},
    ),
    (
        "IssuerSpec",
        {"acme": {"server": "https://x", "solvers": [{"http01": {"ingress": "nginx"}}]}},
    ),
    (
        "IssuerSpec",
        {
            "acme": {
                "server": "https://x",
                "solvers": [{"http01": {"gatewayHTTPRoute": {"parentRefs": ["gw"]}}}],
            }
        },
    ),
    (
        "IssuerSpec",
        {
            "acme": {
                "server": "https://x",
                "solvers": [{"http01": {"gatewayHTTPRoute": {"serviceType": "LoadBalancer"}}}],
            }
        },
    ),
    (
        "IssuerSpec",
        {"acme": {"server": "https://x", "solvers": [{"dns01": {"webhook": {"groupName": "g"}}}]}},
    ),
    (
        "IssuerSpec",
        {
            "acme": {
                "server": "https://x",
                "solvers": [
                    {
                        "dns01": {
                            "azureDNS": {
                                "subscriptionID": "s",
                                "resourceGroupName": "g",
                                "clientSecretSecretRef": {"name": "a", "key": "b"},
                            }
                        }
                    }
                ],
            }
        },
    ),
    ("IssuerSpec", {"selfSigned": {}, "approvalPolicy": {"deny": [{"name": None, "groups": []}]}}),
    ("IssuerSpec", {"selfSigned": {}, "approvalPolicy": {"deny": [{"name": "no-matcher"}]}}),
    ("CertificateSpec", {"dnsNames": ["a.example"]}),
    ("CertificateSpec", {"issuerRef": {"name": "ss"}}),
    ("CertificateSpec", {"dnsNames": ["1.2.3.4"], "issuerRef": {"name": "ss"}}),
    ("CertificateSpec", {"dnsNames": ["a..b"], "issuerRef": {"name": "ss"}}),
    ("CertificateSpec", {"commonName": "x", "issuerRef": {"name": "ss"}, "duration": "0s"}),
    ("CertificateSpec", {"commonName": "x", "issuerRef": {"name": "ss"}, "duration": "-1h"}),
    ("CertificateSpec", {"commonName": "x", "issuerRef": {"name": "ss", "kind": "Other"}}),
    ("CertificateSpec", {"commonName": "x", "issuerRef": {"name": "ss"}, "secretTemplate": 1}),
    ("CertificateSpec", {"commonName": "x", "issuerRef": {"name": "ss"}, "privateKey": None}),
    (
        "CertificateSpec",
        {"commonName": "x", "issuerRef": {"name": "ss"}, "privateKey": {"size": 256}},
    ),
    (
        "CertificateSpec",
        {
            "commonName": "x",
            "issuerRef": {"name": "ss"},
            "privateKey": {"algorithm": "Ed25519", "size": 1},
        },
    ),
    (
        "CertificateSpec",
        {
            "commonName": "x",
            "issuerRef": {"name": "ss"},
            "renewBefore": "1h",
            "renewBeforePercentage": 5,
        },
    ),
    ("CertificateSpec", {"commonName": "x", "issuerRef": {"name": "ss"}, "usages": ["x"]}),
    (
        "CertificateSpec",
        {"commonName": "x", "issuerRef": {"name": "ss"}, "subject": {"countries": ["ÄÖ"]}},
    ),
    ("CertificateRequestSpec", {"issuerRef": {"name": "ss"}}),
    ("CertificateRequestSpec", {"request": "", "issuerRef": {"name": "ss"}}),
    ("CertificateRequestSpec", {"request": "x", "issuerRef": {"name": "ss"}, "username": "me"}),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("component", "spec"), VALID)
def test_specs_users_write_fit_the_schema(
    openapi: dict[str, Any], component: str, spec: dict[str, Any]
) -> None:
    assert refusals(component, spec) == []
    assert [e.message for e in validator_for(openapi, component).iter_errors(spec)] == []


@pytest.mark.django_db
def test_an_inline_ca_fits_the_schema(openapi: dict[str, Any]) -> None:
    certificate, key = pem_pair()
    spec = {"ca": {"certificate": certificate, "privateKey": key}}
    assert refusals("IssuerSpec", spec) == []
    assert list(validator_for(openapi, "IssuerSpec").iter_errors(spec)) == []
    request = {"request": csr_pem(), "issuerRef": {"name": "ca"}, "expirationSeconds": 3600}
    assert refusals("CertificateRequestSpec", request) == []
    assert list(validator_for(openapi, "CertificateRequestSpec").iter_errors(request)) == []


@pytest.mark.parametrize(("component", "spec"), INVALID)
def test_specs_refused_for_their_shape_are_outside_the_schema(
    openapi: dict[str, Any], component: str, spec: dict[str, Any]
) -> None:
    assert refusals(component, spec) != []
    assert list(validator_for(openapi, component).iter_errors(spec)) != []


def test_a_trailing_newline_is_not_part_of_a_name() -> None:
    """re's `$` matches before a final newline: the validators match names in full."""
    spec = {"dnsNames": ["a.example\n"], "emailAddresses": ["a\n@b.example"]}
    paths = [path for path, _ in refusals("CertificateSpec", {**spec, "issuerRef": {"name": "x"}})]
    assert paths == ["spec.dnsNames[0]", "spec.emailAddresses[0]"]


def ref_of(field: dict[str, Any]) -> str:
    """The component a field refers to (drf-spectacular wraps a $ref with a description in
    allOf)."""
    ref = field["allOf"][0]["$ref"] if "allOf" in field else field["$ref"]
    return str(ref).rsplit("/", 1)[1]


def test_the_schema_states_what_cert_manager_requires(openapi: dict[str, Any]) -> None:
    schemas = openapi["components"]["schemas"]
    certificate = schemas["CertificateSpec"]
    assert certificate["required"] == ["issuerRef"]
    assert certificate["properties"]["issuerRef"]["required"] == ["name"]
    assert certificate["additionalProperties"] is False
    issuer = schemas["IssuerSpec"]
    assert [k["required"] for k in issuer["oneOf"]] == [["acme"], ["ca"], ["selfSigned"]]
    solver = issuer["properties"]["acme"]["properties"]["solvers"]["items"]
    assert [k["required"] for k in solver["oneOf"]] == [["http01"], ["dns01"]]
    providers = [k["required"][0] for k in solver["properties"]["dns01"]["oneOf"]]
    assert {"rfc2136", "webhook", "lexicon", "cloudflare", "route53"} <= set(providers)
    assert schemas["CertificateRequestSpec"]["required"] == ["request", "issuerRef"]
    # A PATCH body is a merge patch: nothing required, null removes a field.
    patch = schemas["CertificateSpecPatch"]
    assert "required" not in patch
    assert patch["properties"]["issuerRef"]["nullable"] is True
    body = openapi["paths"]["/api/v1/certificates/{name}/"]["patch"]["requestBody"]
    ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
    assert ref_of(schemas[ref]["properties"]["spec"]) == "CertificateSpecPatch"
    # Responses say the stored shapes; Orders and Challenges are read only.
    assert ref_of(schemas["Certificate"]["properties"]["spec"]) == "CertificateSpec"
    assert ref_of(schemas["Order"]["properties"]["spec"]) == "OrderSpec"
    assert ref_of(schemas["Challenge"]["properties"]["spec"]) == "ChallengeSpec"
    assert schemas["OrderSpec"]["readOnly"] is True


def test_operations_that_may_refuse_a_well_formed_body_say_why(openapi: dict[str, Any]) -> None:
    for path in ("/api/v1/certificates/", "/api/v1/issuers/", "/api/v1/certificaterequests/"):
        assert "400 also when" in openapi["paths"][path]["post"]["description"]
    for path in ("/api/v1/certificates/{name}/", "/api/v1/issuers/{name}/"):
        for method in ("put", "patch"):
            assert "400 also when" in openapi["paths"][path][method]["description"]


@pytest.mark.django_db
@pytest.mark.parametrize("method", ["put", "patch"])
@pytest.mark.parametrize("where", ["name", "metadata"])
def test_a_body_naming_another_resource_than_the_url_is_refused(
    world: dict[str, Any], operator: APIClient, admin: APIClient, method: str, where: str
) -> None:
    """As the Kubernetes API does: a resource is not renamed by a PUT or PATCH."""
    spec: dict[str, Any] = {"selfSigned": {}}
    name: dict[str, Any] = {"name": "other"} if where == "name" else {"metadata": {"name": "other"}}
    response = getattr(admin, method)("/api/v1/issuers/ss/", {**name, "spec": spec}, format="json")
    assert response.status_code == 400, response.content
    assert "name in the URL" in response.json()["name"][0]
    assert not Issuer.objects.filter(name="other").exists()
    same: dict[str, Any] = {"name": "web"} if where == "name" else {"metadata": {"name": "web"}}
    response = getattr(operator, method)(
        "/api/v1/certificates/web/",
        {**same, "spec": {**world["web"].spec, "duration": "720h"}},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert Certificate.objects.get(name="web").spec["duration"] == "720h0m0s"
