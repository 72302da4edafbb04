"""End to end through the worker: selfSigned and CA issuance, Ready certificates."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography import x509

from issuance.controllers import issuers as issuer_controller
from issuance.models import (
    Approval,
    Certificate,
    CertificateRequest,
    CertificateState,
    Event,
    Issuer,
    RequestState,
    Secret,
)
from issuance.pki.keys import public_key_bytes, validate_private_key
from issuance.pki.x509 import cert_info, split_pem_chain
from tests.factories import make_ca_issuer, make_certificate, make_selfsigned_issuer
from tests.helpers import drain

pytestmark = pytest.mark.django_db


def test_selfsigned_certificate_becomes_ready() -> None:
    issuer = make_selfsigned_issuer()
    cert = make_certificate("web", issuer, privateKey={"algorithm": "ECDSA", "size": 256})
    assert drain() > 0
    cert.refresh_from_db()
    assert cert.state == CertificateState.READY, cert.conditions
    assert cert.condition_is("Ready")
    assert cert.get_condition("Issuing") is None
    assert cert.revision == 1
    assert cert.next_private_key_ciphertext == ""
    secret = Secret.objects.get(name="web-tls")
    info = cert_info(secret.tls_crt)
    assert info.dns_names == ["web.example.test"]
    assert info.key_algorithm == "ECDSA"
    key = validate_private_key(secret.tls_key, "tls.key")
    assert public_key_bytes(key.public_key()) == info.public_key_der
    assert info.issuer == info.subject  # self-signed
    assert cert.not_after == info.not_after
    lifetime = info.not_after - info.not_before
    assert lifetime == timedelta(hours=2160) + timedelta(minutes=5)  # 5 min backdate
    # renewal at two thirds of the lifetime, minus at most the jitter
    assert cert.renewal_time is not None
    assert cert.renewal_time <= info.not_after - lifetime / 3
    assert cert.renewal_time >= info.not_after - lifetime / 3 - timedelta(hours=1)
    request = CertificateRequest.objects.get(certificate=cert)
    assert request.revision == 1
    assert request.name == "web-1"
    assert request.approval == Approval.APPROVED
    assert request.decided_by == "policy"
    assert request.state == RequestState.ISSUED
    assert request.spec["requester"]["username"] == "system:certificate-controller"
    reasons = list(
        Event.objects.filter(certificate_name="web").order_by("id").values_list("reason", flat=True)
    )
    assert "Issued" in reasons and "Requested" in reasons
    # Nothing left to do: a second drain does nothing and keeps the revision.
    assert drain() == 0
    cert.refresh_from_db()
    assert cert.revision == 1
    # the worker looks again at the renewal time, not before
    assert cert.due_at is not None
    assert cert.renewal_time <= cert.due_at <= cert.renewal_time + timedelta(seconds=5)


def test_ca_issuer_signs_with_chain() -> None:
    issuer = make_ca_issuer(maxDuration="720h")
    assert issuer_controller.reconcile(issuer).requeue_after is not None
    issuer.refresh_from_db()
    assert issuer.condition_is("Ready"), issuer.conditions
    cert = make_certificate("api", issuer, duration="2160h", dnsNames=["api.example.test"])
    drain()
    cert.refresh_from_db()
    assert cert.state == CertificateState.READY, cert.conditions
    secret = Secret.objects.get(name="api-tls")
    chain = split_pem_chain(secret.tls_crt)
    assert len(chain) == 2
    ca_secret = Secret.objects.get(name="test-ca")
    assert chain[1].strip() == split_pem_chain(ca_secret.tls_crt)[0].strip()
    assert secret.ca_crt.strip() == split_pem_chain(ca_secret.tls_crt)[0].strip()
    leaf = x509.load_pem_x509_certificate(chain[0].encode())
    ca = x509.load_pem_x509_certificate(chain[1].encode())
    leaf.verify_directly_issued_by(ca)
    # capped by the issuer's maxDuration (720h), not the 2160h asked for
    lifetime = leaf.not_valid_after_utc - leaf.not_valid_before_utc
    assert lifetime == timedelta(hours=720) + timedelta(minutes=5)


def test_ca_issuer_not_ready_without_secret() -> None:
    issuer = make_ca_issuer(name="broken", secret_name="nope")
    Secret.objects.filter(name="nope").delete()
    issuer_controller.reconcile(issuer)
    issuer.refresh_from_db()
    cond = issuer.get_condition("Ready")
    assert cond and cond["status"] == "False" and cond["reason"] == "ErrGetKeyPair"
    cert = make_certificate("c1", issuer)
    drain()
    request = CertificateRequest.objects.get(certificate=cert)
    assert request.state == RequestState.PENDING
    assert "ErrGetKeyPair" in request.last_error
    assert request.due_at is not None


def test_generated_ca() -> None:
    issuer = Issuer.objects.create(
        name="gen", kind="ca", spec={"ca": {"secretName": "gen-ca", "generate": True}}
    )
    issuer.due_at = None
    drain()  # nothing due
    issuer_controller.reconcile(issuer)
    secret = Secret.objects.get(name="gen-ca")
    info = cert_info(secret.tls_crt)
    assert info.is_ca and info.common_name == "gen"
    issuer_controller.reconcile(issuer)
    issuer.refresh_from_db()
    assert issuer.condition_is("Ready")
    # generated once: a second pass keeps the same key pair
    assert Secret.objects.get(name="gen-ca").tls_crt == secret.tls_crt
    assert Certificate.objects.count() == 0
