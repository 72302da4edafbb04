"""The revocations controller against the scripted ACME server (what Pebble will not do on
demand): a refusal marks the revocation Failed and renews nothing, a 503 is retried, the
JWS is signed by the account (kid) or, for keyCompromise, by the certificate's key (jwk),
and a Failed revocation may be asked for again (the same row)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from datetime import timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django.utils import timezone
from josepy.jwk import JWK

from issuance.acme import health, ratelimit
from issuance.acme.accounts import ensure_account_key, forget_clients
from issuance.controllers import revocations
from issuance.controllers.base import TemporaryError
from issuance.models import Certificate, Event, Issuer, Revocation, RevocationState, Secret
from issuance.operations import actions
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, load_stored_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from tests.acme.fakeca import FakeCA, Reply, problem
from tests.factories import make_ca_secret, make_certificate

pytestmark = pytest.mark.django_db


@pytest.fixture
def ca() -> Iterator[FakeCA]:
    server = FakeCA()
    server.directory["revokeCert"] = f"{server.base}/revoke"
    ratelimit.forget_cache()
    health.forget()
    forget_clients()
    yield server
    server.stop()
    forget_clients()
    ratelimit.forget_cache()
    health.forget()


def issued_cert(ca: FakeCA) -> tuple[Certificate, str]:
    """An ACME Certificate with a stored leaf (signed by some CA) and its key."""
    issuer = Issuer.objects.create(
        name="fake",
        kind="acme",
        spec={"acme": {"server": ca.directory_url, "solvers": [{"http01": {}}]}},
        acme_account_uri=f"{ca.base}/acct/1",
    )
    ensure_account_key(issuer)
    cert = make_certificate("web", issuer)
    ca_secret = make_ca_secret("some-ca")
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    leaf = sign_csr(
        build_csr(key, {"dnsNames": ["web.example.test"]}),
        load_stored_private_key(ca_secret.tls_key),
        ca_secret.tls_crt,
        duration=timedelta(days=30),
        now=timezone.now(),
    )
    key_pem = private_key_to_pem(key)
    secret = Secret(name=cert.secret_name, tls_crt=leaf, ca_crt=ca_secret.tls_crt, certificate=cert)
    secret.tls_key = key_pem
    secret.save()
    return cert, key_pem


def leaf_b64(cert: Certificate) -> str:
    pem = Secret.objects.get(name=cert.secret_name).tls_crt
    der = x509.load_pem_x509_certificate(pem.encode()).public_bytes(serialization.Encoding.DER)
    return base64.urlsafe_b64encode(der).rstrip(b"=").decode()


def test_refusal_is_failed_and_renews_nothing_then_may_be_asked_again(ca: FakeCA) -> None:
    cert, _ = issued_cert(ca)
    revocation = actions.revoke(cert, "superseded", actor="alice")
    assert revocation.state == RevocationState.PENDING
    ca.on("/revoke", problem(403, "unauthorized", "not your certificate"))
    revocations.reconcile(Revocation.objects.get(pk=revocation.pk))
    revocation.refresh_from_db()
    assert revocation.state == RevocationState.FAILED
    assert "unauthorized" in revocation.message
    assert "not your certificate" in revocation.message
    cert.refresh_from_db()
    assert cert.renew_requested_at is None
    assert Event.objects.filter(certificate_name="web", reason="RevocationFailed").count() == 1

    again = actions.revoke(cert, "cessationOfOperation", actor="bob")
    assert again.pk == revocation.pk
    assert Revocation.objects.count() == 1
    ca.on("/revoke", Reply(200, ""))
    revocations.reconcile(Revocation.objects.get(pk=revocation.pk))
    revocation.refresh_from_db()
    assert revocation.state == RevocationState.REVOKED
    assert (revocation.reason, revocation.requested_by) == ("cessationOfOperation", "bob")
    assert ca.payloads["/revoke"] == {"certificate": leaf_b64(cert), "reason": 5}
    cert.refresh_from_db()
    assert cert.renew_requested_by == "bob"


def test_server_error_is_retried_and_account_key_signs(ca: FakeCA) -> None:
    cert, _ = issued_cert(ca)
    revocation = actions.revoke(cert, "unspecified", actor="alice")
    ca.on("/revoke", Reply(503, "busy"), Reply(200, ""))
    with pytest.raises(TemporaryError):
        revocations.reconcile(Revocation.objects.get(pk=revocation.pk))
    assert Revocation.objects.get(pk=revocation.pk).state == RevocationState.PENDING
    revocations.reconcile(Revocation.objects.get(pk=revocation.pk))
    assert Revocation.objects.get(pk=revocation.pk).state == RevocationState.REVOKED
    assert ca.hits["/revoke"] == 2
    header = ca.protected["/revoke"]
    assert header["kid"] == f"{ca.base}/acct/1"
    assert "jwk" not in header
    assert ca.payloads["/revoke"]["reason"] == 0


def test_key_compromise_is_signed_by_the_certificate_key(ca: FakeCA) -> None:
    cert, key_pem = issued_cert(ca)
    revocation = actions.revoke(cert, "keyCompromise", actor="alice")
    assert revocation.key_ciphertext  # kept (encrypted) until the CA answered
    ca.on("/revoke", problem(400, "alreadyRevoked", "already revoked"))
    revocations.reconcile(Revocation.objects.get(pk=revocation.pk))
    revocation.refresh_from_db()
    assert revocation.state == RevocationState.REVOKED
    assert "already revoked" in revocation.message
    assert revocation.key_ciphertext == ""
    header = ca.protected["/revoke"]
    assert "kid" not in header
    assert header["jwk"] == JWK.load(key_pem.encode()).public_key().to_json()
    assert ca.payloads["/revoke"] == {"certificate": leaf_b64(cert), "reason": 1}
