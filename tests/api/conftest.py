"""API test fixtures: a small world of issuers, a certificate with a stored key pair, a CSR."""

from __future__ import annotations

from typing import Any

import pytest

from issuance.models import CertificateRequest, Issuer, Secret
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key
from tests.factories import make_ca_issuer, make_certificate, make_selfsigned_issuer

CSR_KEY = generate_private_key({"algorithm": "ECDSA", "size": 256})


def csr_pem(*names: str, common_name: str = "") -> str:
    spec: dict[str, Any] = {"dnsNames": list(names) or ["ext.example.test"]}
    if common_name:
        spec["commonName"] = common_name
    return build_csr(CSR_KEY, spec)


@pytest.fixture
def world(db: Any) -> dict[str, Any]:
    ss = make_selfsigned_issuer("ss")
    ca = make_ca_issuer("ca", secret_name="ca-key-pair")
    spare = make_selfsigned_issuer("spare")
    web = make_certificate("web", ss)
    tls = Secret.objects.get(name="ca-key-pair")
    # A stored key pair for "web" (any pair will do for the API).
    stored = Secret(name=web.secret_name, tls_crt=tls.tls_crt, ca_crt=tls.ca_crt, certificate=web)
    stored.tls_key = tls.tls_key
    stored.save()
    ext = CertificateRequest.objects.create(
        name="ext-1",
        issuer=ca,
        spec={"request": csr_pem(), "issuerRef": {"name": "ca", "kind": "Issuer"}},
        requester="someone",
        source="api",
    )
    return {"ss": ss, "ca": ca, "spare": spare, "web": web, "ext": ext}


def counts() -> dict[str, int]:
    from issuance.models import Certificate, Event

    return {
        "issuers": Issuer.objects.count(),
        "certificates": Certificate.objects.count(),
        "requests": CertificateRequest.objects.count(),
        "secrets": Secret.objects.count(),
        "events": Event.objects.count(),
    }


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    """role_users makes five users per test; PBKDF2 would dominate the run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def make_order(
    request: CertificateRequest, name: str, challenges: int = 2, processing: int = 0
) -> Any:
    """An Order with `challenges` Challenges (the first `processing` of them processing)."""
    from issuance.models import Challenge, Order

    order = Order.objects.create(
        name=name,
        request=request,
        issuer=request.issuer,
        spec={"request": request.name, "dnsNames": [f"{name}.example.test"]},
        url=f"https://acme.test/order/{name}",
        state="pending",
        authorizations=[{"url": f"https://acme.test/authz/{name}/0"}],
    )
    for i in range(challenges):
        Challenge.objects.create(
            name=f"{name}-{i}",
            order=order,
            issuer=request.issuer,
            dns_name=f"{name}-{i}.example.test",
            type="http-01",
            authorization_url=f"https://acme.test/authz/{name}/{i}",
            token=f"tok-{name}-{i}",
            spec={"dnsName": f"{name}-{i}.example.test", "type": "http-01", "token": f"t{i}"},
            processing=i < processing,
            state="pending" if i < processing else "",
        )
    return order
