"""A Certificate of a CA issuer with two revisions (and the key pair of each), for the probe
tests to serve from real servers."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.models import Certificate, Endpoint, Issuer, Secret
from issuance.operations import actions
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, load_stored_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from tests.factories import make_ca_issuer, make_certificate
from tests.helpers import drain


@dataclass
class Pair:
    chain: str  # leaf first
    key: str


@dataclass
class Issued:
    cert: Certificate
    issuer: Issuer
    revisions: dict[int, Pair]

    def endpoint(self, port: int, protocol: str = "tls", server_name: str = "") -> Endpoint:
        return Endpoint.objects.create(
            certificate=self.cert,
            host="127.0.0.1",
            port=port,
            server_name=server_name or "web.example.test",
            protocol=protocol,
        )


def _current(cert: Certificate) -> Pair:
    secret = Secret.objects.get(name=cert.secret_name)
    return Pair(secret.tls_crt, secret.tls_key)


@pytest.fixture
def issued(db: None) -> Issued:
    return issue_two_revisions()


@pytest.fixture
def issued_committed(transactional_db: None) -> Issued:
    """The same, committed: for tests whose probes run on the probe step's own threads."""
    return issue_two_revisions()


def issue_two_revisions() -> Issued:
    issuer = make_ca_issuer()
    cert = make_certificate("web", issuer, dnsNames=["web.example.test"])
    drain()
    cert.refresh_from_db()
    assert cert.revision == 1
    first = _current(cert)
    actions.force_renew(cert, actor="test")
    drain()
    cert.refresh_from_db()
    assert cert.revision == 2
    return Issued(cert, issuer, {1: first, 2: _current(cert)})


def signed_by_ca(
    issuer: Issuer, names: list[str], *, days: int = 30, start_days_ago: int = 0
) -> Pair:
    """A certificate from the issuer's CA that no Certificate here requested."""
    ca = Secret.objects.get(name=issuer.ca_spec["secretName"])
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    csr = build_csr(key, {"dnsNames": names})
    pem = sign_csr(
        csr,
        load_stored_private_key(ca.tls_key),
        ca.tls_crt,
        duration=timedelta(days=days),
        now=timezone.now() - timedelta(days=start_days_ago),
    )
    return Pair(pem, private_key_to_pem(key))


def self_signed(names: list[str]) -> Pair:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    csr = build_csr(key, {"dnsNames": names})
    pem = sign_csr(csr, key, None, duration=timedelta(days=30), now=timezone.now())
    return Pair(pem, private_key_to_pem(key))
