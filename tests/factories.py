"""Direct domain-level builders for tests (bypassing the API on purpose)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from issuance.models import Certificate, Issuer, Secret
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr


def make_selfsigned_issuer(name: str = "selfsigned", **spec: Any) -> Issuer:
    return Issuer.objects.create(name=name, kind="selfSigned", spec={"selfSigned": spec})


def make_ca_secret(name: str = "test-ca", common_name: str = "Test CA") -> Secret:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    csr = build_csr(key, {"commonName": common_name})
    cert = sign_csr(csr, key, None, duration=timedelta(days=3650), now=timezone.now(), is_ca=True)
    secret = Secret(name=name, tls_crt=cert, ca_crt=cert)
    secret.tls_key = private_key_to_pem(key)
    secret.save()
    return secret


def make_ca_issuer(name: str = "ca", secret_name: str = "test-ca", **ca: Any) -> Issuer:
    if not Secret.objects.filter(name=secret_name).exists():
        make_ca_secret(secret_name)
    return Issuer.objects.create(
        name=name, kind="ca", spec={"ca": {"secretName": secret_name, **ca}}
    )


def make_certificate(name: str, issuer: Issuer, **spec: Any) -> Certificate:
    full = {
        "secretName": name + "-tls",
        "dnsNames": [f"{name}.example.test"],
        "issuerRef": {"name": issuer.name, "kind": "Issuer"},
        **spec,
    }
    cert = Certificate(name=name, issuer=issuer, spec=full, secret_name=full["secretName"])
    cert.refresh_search_text()
    cert.due_at = timezone.now()
    cert.save()
    return cert
