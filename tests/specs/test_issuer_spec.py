"""Issuer spec validation and the apply service: real manifests, inline secrets, outcomes."""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import pytest
import yaml
from django.utils import timezone

from issuance.models import Event, Issuer, Secret
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from issuance.pki.x509 import cert_info
from issuance.specs import SpecError, apply_issuer, apply_issuer_ex, validate_issuer_spec
from issuance.specs.issuer import APPROVAL_POLICY_FIELDS
from issuance.specs.outcome import Outcome
from issuance.specs.secret_refs import SecretRefError, read_secret_value

LETSENCRYPT_STAGING = """
acme:
  email: user@example.com
  server: https://acme-staging-v02.api.letsencrypt.org/directory
  profile: tlsserver
  privateKeySecretRef:
    name: example-issuer-account-key
  solvers:
    - http01:
        ingress: {}
    - selector:
        dnsZones: [example.com]
      dns01:
        cnameStrategy: Follow
        rfc2136:
          nameserver: 1.2.3.4:53
          tsigKeyName: example-com-secret
          tsigAlgorithm: HMACSHA512
          tsigSecretSecretRef:
            name: tsig-secret
            key: tsig-secret-key
"""


def plan(spec: dict[str, Any], name: str = "iss") -> Any:
    return validate_issuer_spec(name, spec, lookups=False)


def problems(spec: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as info:
        plan(spec)
    return info.value.as_dict()


def make_ca(common_name: str = "Test CA") -> tuple[str, str]:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    cert = sign_csr(
        build_csr(key, {"commonName": common_name}),
        key,
        None,
        duration=timedelta(days=30),
        now=timezone.now(),
        is_ca=True,
    )
    return cert, private_key_to_pem(key)


def test_cert_manager_acme_manifest_is_accepted() -> None:
    result = plan(yaml.safe_load(LETSENCRYPT_STAGING))
    assert result.kind == "acme"
    acme = result.spec["acme"]
    assert acme["server"].startswith("https://acme-staging")
    assert acme["solvers"][0] == {"http01": {}}
    assert acme["solvers"][1]["dns01"]["rfc2136"]["tsigSecretSecretRef"] == {
        "name": "tsig-secret",
        "key": "tsig-secret-key",
    }
    assert acme["solvers"][1]["selector"] == {"dnsZones": ["example.com"]}
    assert result.secrets == []


def test_inline_secrets_are_moved_out_of_the_spec() -> None:
    tsig = base64.b64encode(b"tsig-secret-bytes").decode()
    result = plan(
        {
            "acme": {
                "server": "https://localhost:14000/dir",
                "externalAccountBinding": {"keyID": "kid", "hmacKey": "c2VjcmV0LWtleQ"},
                "solvers": [
                    {
                        "dns01": {
                            "rfc2136": {
                                "nameserver": "[::1]:5353",
                                "tsigKeyName": "k",
                                "tsigSecret": tsig,
                            }
                        }
                    },
                    {"dns01": {"webhook": {"url": "http://127.0.0.1:9000/present"}}},
                ],
            }
        }
    )
    text = str(result.spec)
    assert "c2VjcmV0LWtleQ" not in text and tsig not in text
    assert result.spec["acme"]["externalAccountBinding"]["keySecretRef"] == {
        "name": "iss-eab",
        "key": "secret",
    }
    rfc = result.spec["acme"]["solvers"][0]["dns01"]["rfc2136"]
    assert rfc["tsigSecretSecretRef"] == {"name": "iss-tsig-0", "key": "secret"}
    assert [w.name for w in result.secrets] == ["iss-eab", "iss-tsig-0"]


def test_ca_bundle_raw_pem_is_stored_base64() -> None:
    cert, _ = make_ca()
    result = plan({"acme": {"server": "https://pebble.test/dir", "caBundle": cert}})
    assert base64.b64decode(result.spec["acme"]["caBundle"]).decode() == cert
    again = plan(result.spec)
    assert again.spec == result.spec


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (
            {"acme": {"server": "https://a.test", "disableAccountKeyGeneration": True}},
            "spec.acme.privateKeySecretRef",
        ),
        ({"acme": {"server": "https://a.test", "solvers": [{}]}}, "spec.acme.solvers[0]"),
        (
            {"acme": {"server": "https://a.test", "solvers": [{"http01": {}, "dns01": {}}]}},
            "spec.acme.solvers[0]",
        ),
        (
            {
                "acme": {
                    "server": "https://a.test",
                    "solvers": [{"dns01": {"webhook": {"groupName": "g"}}}],
                }
            },
            "spec.acme.solvers[0].dns01.webhook.solverName",
        ),
        (
            {
                "acme": {
                    "server": "https://a.test",
                    "solvers": [{"dns01": {"rfc2136": {"nameserver": "a b"}}}],
                }
            },
            "spec.acme.solvers[0].dns01.rfc2136.nameserver",
        ),
        (
            {
                "acme": {
                    "server": "https://a.test",
                    "solvers": [{"dns01": {"rfc2136": {"nameserver": "ns", "tsigKeyName": "k"}}}],
                }
            },
            "spec.acme.solvers[0].dns01.rfc2136",
        ),
        (
            {
                "acme": {
                    "server": "https://a.test",
                    "solvers": [{"selector": {"dnsNames": ["a..b"]}, "http01": {}}],
                }
            },
            "spec.acme.solvers[0].selector.dnsNames[0]",
        ),
        (
            {
                "acme": {
                    "server": "https://a.test",
                    "solvers": [{"selector": {"dnsZones": ["*.a.test"]}, "http01": {}}],
                }
            },
            "spec.acme.solvers[0].selector.dnsZones[0]",
        ),
        (
            {"acme": {"server": "https://a.test", "externalAccountBinding": {"hmacKey": "aGk"}}},
            "spec.acme.externalAccountBinding.keyID",
        ),
        (
            {
                "acme": {
                    "server": "https://a.test",
                    "externalAccountBinding": {"keyID": "k", "hmacKey": "not base64!"},
                }
            },
            "spec.acme.externalAccountBinding.hmacKey",
        ),
        ({"ca": {}}, "spec.ca.secretName"),
        ({"ca": {"generate": True, "certificate": "x"}}, "spec.ca.generate"),
        ({"ca": {"secretName": "s", "commonName": "CN"}}, "spec.ca.commonName"),
        ({"ca": {"certificate": "x"}}, "spec.ca.privateKey"),
        ({"selfSigned": {"crlDistributionPoints": []}}, "spec.selfSigned.crlDistributionPoints"),
        ({"selfSigned": {}, "approvalPolicy": {"other": 1}}, "spec.approvalPolicy.other"),
    ],
)
def test_issuer_field_errors(spec: dict[str, Any], field: str) -> None:
    assert field in problems(spec)


def test_leaf_certificate_is_not_a_ca() -> None:
    ca_cert, ca_key = make_ca()
    from issuance.pki.keys import validate_private_key

    leaf_key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    leaf = sign_csr(
        build_csr(leaf_key, {"commonName": "leaf"}),
        validate_private_key(ca_key, "ca"),
        ca_cert,
        duration=timedelta(days=1),
        now=timezone.now(),
    )
    errors = problems({"ca": {"certificate": leaf, "privateKey": private_key_to_pem(leaf_key)}})
    assert "not a CA" in errors["spec.ca.certificate"][0]


def test_approval_policy_is_extensible() -> None:
    assert plan({"selfSigned": {}, "approvalPolicy": {"autoApprove": "all"}}).spec[
        "approvalPolicy"
    ] == {"autoApprove": "all"}
    assert "autoApprove" in APPROVAL_POLICY_FIELDS


def test_apply_inline_ca_outcomes(db: None) -> None:
    cert, key = make_ca()
    spec = {"ca": {"certificate": cert, "privateKey": key, "maxDuration": "720h"}}
    issuer, created = apply_issuer("corp", spec, actor="alice")
    assert created
    assert issuer.spec == {"ca": {"secretName": "corp-ca", "maxDuration": "720h0m0s"}}
    secret = Secret.objects.get(name="corp-ca")
    assert secret.tls_crt == cert and "PRIVATE KEY" not in secret.tls_key_ciphertext
    assert read_secret_value("corp-ca", "tls.crt") == cert
    # Re-applying the same manifest is "unchanged"; a new key pair is "configured".
    assert apply_issuer_ex("corp", spec, actor="alice").outcome is Outcome.UNCHANGED
    cert2, key2 = make_ca("Second CA")
    applied = apply_issuer_ex(
        "corp",
        {"ca": {"certificate": cert2, "privateKey": key2, "maxDuration": "720h"}},
        actor="bob",
    )
    assert applied.outcome is Outcome.CONFIGURED
    assert applied.obj.generation == 2
    assert Secret.objects.get(name="corp-ca").tls_crt == cert2
    assert Event.objects.filter(name="corp", reason="SpecChanged", actor="bob").exists()


def test_apply_generate_ca_is_idempotent(db: None) -> None:
    issuer, _ = apply_issuer("gen", {"ca": {"generate": True}}, actor="x", cluster=True)
    assert issuer.cluster_scoped and issuer.kind == "ca"
    assert issuer.spec["ca"] == {"generate": True, "secretName": "gen-ca", "commonName": "gen CA"}
    first = Secret.objects.get(name="gen-ca").tls_crt
    assert cert_info(first).is_ca
    assert apply_issuer_ex("gen", {"ca": {"generate": True}}, actor="x", cluster=True).outcome is (
        Outcome.UNCHANGED
    )
    assert Secret.objects.get(name="gen-ca").tls_crt == first


def test_apply_eab_secret_and_kind_change(db: None) -> None:
    spec = {
        "acme": {
            "server": "https://a.test/dir",
            "externalAccountBinding": {"keyID": "kid", "hmacKey": "c2VjcmV0"},
        }
    }
    apply_issuer("acme", spec, actor="x")
    assert read_secret_value("acme-eab") == "c2VjcmV0"
    with pytest.raises(SecretRefError):
        read_secret_value("acme-eab", "other")
    with pytest.raises(SecretRefError):
        read_secret_value("missing")
    applied = apply_issuer_ex("acme", {"selfSigned": {}}, actor="x")
    assert applied.outcome is Outcome.CONFIGURED and applied.obj.kind == "selfSigned"


def test_apply_refuses_to_overwrite_a_certificate_secret(db: None) -> None:
    from tests.factories import make_certificate, make_selfsigned_issuer

    cert = make_certificate("web", make_selfsigned_issuer("ss"))
    Secret.objects.create(name="web-tls", certificate=cert, tls_crt="x")
    ca_cert, ca_key = make_ca()
    with pytest.raises(SpecError) as info:
        apply_issuer(
            "evil",
            {"ca": {"secretName": "web-tls", "certificate": ca_cert, "privateKey": ca_key}},
            actor="x",
        )
    assert "Certificate 'web'" in str(info.value)
    assert not Issuer.objects.filter(name="evil").exists()
    assert Secret.objects.get(name="web-tls").tls_crt == "x"
