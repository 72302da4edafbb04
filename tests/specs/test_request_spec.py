"""CertificateRequest specs and the create service."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from issuance.models import CertificateRequest, Event
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key
from issuance.specs import SpecError, create_certificate_request, validate_request_spec
from tests.factories import make_ca_issuer

KEY = generate_private_key({"algorithm": "Ed25519"})
PEM = build_csr(KEY, {"commonName": "node-1", "dnsNames": ["node-1.cluster.test"]})


def test_valid_request_is_normalized() -> None:
    spec = validate_request_spec(
        {
            "request": base64.b64encode(PEM.encode()).decode(),
            "issuerRef": {"name": "ca", "kind": "ClusterIssuer"},
            "duration": "24h",
            "usages": ["client auth"],
            "isCA": False,
        },
        issuer_exists=None,
    )
    assert spec == {
        "request": PEM,
        "issuerRef": {"name": "ca", "kind": "ClusterIssuer"},
        "duration": "24h0m0s",
        "usages": ["client auth"],
        "isCA": False,
    }


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"duration": "1h", "expirationSeconds": 3600}, "spec.expirationSeconds"),
        ({"expirationSeconds": 599}, "spec.expirationSeconds"),
        ({"groups": ["system:masters"]}, "spec.groups"),
        ({"request": PEM.replace("MI", "mi", 1)}, "spec.request"),
    ],
)
def test_request_errors(extra: dict[str, Any], field: str) -> None:
    with pytest.raises(SpecError) as info:
        validate_request_spec(
            {"request": PEM, "issuerRef": {"name": "ca"}, **extra}, issuer_exists=None
        )
    assert field in info.value.as_dict()


def test_create_service(db: None) -> None:
    make_ca_issuer("ca")
    cr = create_certificate_request(
        None, {"request": PEM, "issuerRef": {"name": "ca"}}, requester="kubelet", source="bootstrap"
    )
    cr.refresh_from_db()
    assert cr.name.startswith("csr-")
    assert (cr.requester, cr.source, cr.certificate) == ("kubelet", "bootstrap", None)
    assert cr.issuer.name == "ca" and cr.due_at is not None
    assert Event.objects.get(name=cr.name).actor == "kubelet"
    with pytest.raises(SpecError) as info:
        create_certificate_request(
            cr.name, {"request": PEM, "issuerRef": {"name": "ca"}}, requester="x"
        )
    assert "already exists" in info.value.as_dict()["name"][0]
    assert CertificateRequest.objects.count() == 1
