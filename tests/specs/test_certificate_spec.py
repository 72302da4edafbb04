"""Certificate spec validation: real cert-manager manifests pass, every problem is named."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from issuance.models import Certificate, Event
from issuance.shapes import CertificateSpec
from issuance.specs import (
    SpecError,
    apply_certificate,
    apply_certificate_ex,
    validate_certificate_spec,
)
from issuance.specs.outcome import Outcome
from tests.factories import make_selfsigned_issuer

# From cert-manager's documentation (usage/certificate), minus keystores.
CERT_MANAGER_EXAMPLE = """
secretName: example-com-tls
secretTemplate:
  annotations:
    my-secret-annotation-1: "foo"
    my-secret-annotation-2: "bar"
  labels:
    my-secret-label: foo
duration: 2160h # 90d
renewBefore: 360h # 15d
isCA: false
privateKey:
  algorithm: RSA
  encoding: PKCS1
  size: 2048
  rotationPolicy: Always
usages:
  - server auth
  - client auth
subject:
  organizations:
    - jetstack
dnsNames:
  - example.com
  - www.example.com
uris:
  - spiffe://cluster.local/ns/sandbox/sa/example
emailAddresses:
  - john.doe@cert-manager.io
ipAddresses:
  - 192.168.0.5
issuerRef:
  name: ca-issuer
  kind: Issuer
  group: cert-manager.io
"""


def validate(spec: dict[str, Any], name: str = "web") -> CertificateSpec:
    return validate_certificate_spec(name, spec, issuer_exists=None)


def problems(spec: dict[str, Any]) -> dict[str, list[str]]:
    with pytest.raises(SpecError) as info:
        validate(spec)
    return info.value.as_dict()


def test_cert_manager_example_is_accepted_as_is() -> None:
    spec = yaml.safe_load(CERT_MANAGER_EXAMPLE)
    out = validate(spec)
    assert out["duration"] == "2160h0m0s"
    assert out["renewBefore"] == "360h0m0s"
    assert out["secretName"] == "example-com-tls"
    assert out["privateKey"] == spec["privateKey"]
    assert out["subject"] == {"organizations": ["jetstack"]}
    for key in (
        "dnsNames",
        "uris",
        "emailAddresses",
        "ipAddresses",
        "usages",
        "issuerRef",
        "secretTemplate",
    ):
        assert out[key] == spec[key], key
    # Normalizing twice changes nothing (apply relies on this for "unchanged").
    assert validate(dict(out)) == out


def test_defaults_and_normalization() -> None:
    out = validate({"dnsNames": ["WWW.Example.COM", "*.Example.com"], "issuerRef": {"name": "x"}})
    assert out == {
        "secretName": "web",
        "dnsNames": ["www.example.com", "*.example.com"],
        "duration": "2160h0m0s",
        "issuerRef": {"name": "x", "kind": "Issuer"},
    }
    assert (
        validate({"commonName": "a", "issuerRef": {"name": "x"}, "duration": "1.5h"})["duration"]
        == "1h30m0s"
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"dnsNames": "a.test"}, "spec.dnsNames"),
        ({"isCA": "yes"}, "spec.isCA"),
        ({"revisionHistoryLimit": True}, "spec.revisionHistoryLimit"),
        ({"privateKey": {"algorithm": "Ed25519", "size": 256}}, "spec.privateKey.size"),
        ({"privateKey": {"encoding": "DER"}}, "spec.privateKey.encoding"),
        ({"subject": {"countries": ["Germany"]}}, "spec.subject.countries[0]"),
        ({"subject": {"title": "x"}}, "spec.subject.title"),
        ({"secretTemplate": {"labels": []}}, "spec.secretTemplate.labels"),
        ({"secretTemplate": {"labels": {"a b": "x"}}}, "spec.secretTemplate.labels[a b]"),
        ({"secretTemplate": {"labels": {"team": "a b"}}}, "spec.secretTemplate.labels[team]"),
        ({"secretTemplate": {"labels": {"n": 1}}}, "spec.secretTemplate.labels[n]"),
        (
            {"secretTemplate": {"annotations": {"cert-manager.io/issuer-name": "x"}}},
            "spec.secretTemplate.annotations[cert-manager.io/issuer-name]",
        ),
        ({"secretTemplate": {"owner": {}}}, "spec.secretTemplate.owner"),
        ({"otherNames": [{"oid": "1.2.3"}]}, "spec.otherNames[0].utf8Value"),
        ({"otherNames": [{"oid": "3.1", "utf8Value": "x"}]}, "spec.otherNames[0].oid"),
        (
            {"isCA": True, "nameConstraints": {"permitted": {"ipRanges": ["10.0.0.0/33"]}}},
            "spec.nameConstraints.permitted.ipRanges[0]",
        ),
        (
            {"isCA": True, "nameConstraints": {"excluded": {"dnsDomains": ["a..b"]}}},
            "spec.nameConstraints.excluded.dnsDomains[0]",
        ),
        ({"isCA": True, "nameConstraints": {"permitted": {}}}, "spec.nameConstraints"),
        ({"additionalOutputFormats": [{"type": "JKS"}]}, "spec.additionalOutputFormats[0].type"),
        ({"keystores": {"jks": {"create": True}}}, "spec.keystores.jks.passwordSecretRef"),
        (
            {
                "keystores": {
                    "pkcs12": {
                        "create": True,
                        "passwordSecretRef": {"name": "p", "key": "k"},
                        "profile": "Old",
                    }
                }
            },
            "spec.keystores.pkcs12.profile",
        ),
        ({"emailAddresses": ["not-an-email"]}, "spec.emailAddresses[0]"),
        ({"uris": ["no scheme"]}, "spec.uris[0]"),
        ({"secretExport": {"namespace": "default"}}, "spec.secretExport.name"),
        ({"issuerRef": {"name": "x", "group": "example.com"}}, "spec.issuerRef.group"),
        ({"issuerRef": {"kind": "Issuer"}}, "spec.issuerRef.name"),
    ],
)
def test_field_errors(spec: dict[str, Any], field: str) -> None:
    full = {"dnsNames": ["a.test"], "issuerRef": {"name": "x"}, **spec}
    assert field in problems(full)


def test_spec_must_be_an_object() -> None:
    # What a client may send whatever the annotation says: JSON that is not an object.
    not_an_object: Any = []
    assert problems(not_an_object) == {"spec": ["must be an object"]}


def test_secret_export_extension_is_kept() -> None:
    out = validate(
        {
            "dnsNames": ["a.test"],
            "issuerRef": {"name": "x"},
            "secretExport": {"namespace": "apps", "name": "a-tls"},
        }
    )
    assert out["secretExport"] == {"namespace": "apps", "name": "a-tls"}


def test_unknown_issuer_needs_the_database(db: None) -> None:
    with pytest.raises(SpecError) as info:
        validate_certificate_spec("web", {"dnsNames": ["a.test"], "issuerRef": {"name": "nope"}})
    assert info.value.as_dict() == {"spec.issuerRef.name": ["unknown issuer 'nope'"]}


def test_apply_certificate_outcomes(db: None) -> None:
    make_selfsigned_issuer("ss")
    other = make_selfsigned_issuer("other")
    spec = {"dnsNames": ["a.test"], "issuerRef": {"name": "ss"}}
    cert, created = apply_certificate("web", spec, actor="alice")
    assert created and cert.generation == 1 and cert.secret_name == "web"
    assert apply_certificate_ex("web", spec, actor="alice").outcome is Outcome.UNCHANGED
    applied = apply_certificate_ex(
        "web",
        {"dnsNames": ["b.test"], "issuerRef": {"name": "other"}, "secretName": "b"},
        actor="bob",
    )
    assert applied.outcome is Outcome.CONFIGURED
    cert = Certificate.objects.get(name="web")
    assert (cert.generation, cert.issuer, cert.secret_name) == (2, other, "b")
    assert cert.search_text == "web b.test"
    assert list(Event.objects.filter(name="web").order_by("id").values_list("reason", "actor")) == [
        ("Created", "alice"),
        ("SpecChanged", "bob"),
    ]


def test_apply_certificate_invalid_stores_nothing(db: None) -> None:
    make_selfsigned_issuer("ss")
    with pytest.raises(SpecError):
        apply_certificate(
            "Bad Name", {"dnsNames": ["a.test"], "issuerRef": {"name": "ss"}}, actor="x"
        )
    with pytest.raises(SpecError):
        apply_certificate("web", {"dnsNames": ["a_b.test"], "issuerRef": {"name": "ss"}}, actor="x")
    assert Certificate.objects.count() == 0
    assert Event.objects.count() == 0


def test_subject_fields_reach_the_csr() -> None:
    from issuance.pki.csr import build_csr, load_csr
    from issuance.pki.keys import generate_private_key

    subject = {
        "organizations": ["Example Org"],
        "countries": ["DE"],
        "organizationalUnits": ["Platform"],
        "localities": ["Berlin"],
        "provinces": ["Berlin"],
        "streetAddresses": ["Street 1"],
        "postalCodes": ["10115"],
        "serialNumber": "1234",
    }
    spec = validate({"commonName": "x", "issuerRef": {"name": "i"}, "subject": subject})
    assert spec["subject"] == subject
    csr = load_csr(build_csr(generate_private_key({"algorithm": "ECDSA"}), spec))
    text = csr.subject.rfc4514_string()
    for part in (
        "O=Example Org",
        "C=DE",
        "OU=Platform",
        "L=Berlin",
        "ST=Berlin",
        "2.5.4.17=10115",
        "2.5.4.5=1234",
    ):
        assert part in text, text
