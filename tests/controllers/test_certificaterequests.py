"""CertificateRequest controller: approval policy, denial, signing through each issuer kind."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography import x509
from django.test import override_settings

from issuance.controllers import certificaterequests
from issuance.controllers.base import TemporaryError
from issuance.models import Approval, CertificateRequest, Event, Issuer, RequestState
from issuance.operations import actions
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key
from issuance.pki.x509 import split_pem_chain
from tests.controllers.helpers import step_request
from tests.factories import make_ca_issuer, make_selfsigned_issuer

pytestmark = pytest.mark.django_db


def external(issuer: Issuer, name: str = "ext", **spec: object) -> CertificateRequest:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    csr = build_csr(key, {"commonName": "node-1", "dnsNames": ["node-1.example.test"]})
    return CertificateRequest.objects.create(
        name=name,
        issuer=issuer,
        spec={"request": csr, "issuerRef": {"name": issuer.name}, **spec},
        requester="kubelet",
        source="api",
    )


def leaf(request: CertificateRequest) -> x509.Certificate:
    return x509.load_pem_x509_certificate(split_pem_chain(request.certificate_pem)[0].encode())


def lifetime(request: CertificateRequest) -> timedelta:
    cert = leaf(request)
    return cert.not_valid_after_utc - cert.not_valid_before_utc - timedelta(minutes=5)


class TestApprover:
    def test_external_request_waits_for_person_by_default(self) -> None:
        request = external(make_ca_issuer())
        assert step_request(request).requeue_after is None
        request.refresh_from_db()
        assert request.approval == Approval.PENDING
        assert request.state == RequestState.PENDING
        ready = request.get_condition("Ready")
        assert ready is not None and ready["reason"] == "Pending"
        actions.approve(request, "alice")
        step_request(request)
        request.refresh_from_db()
        assert request.state == RequestState.ISSUED
        assert request.decided_by == "alice"

    def test_all_policy_approves_external(self) -> None:
        issuer = make_ca_issuer()
        issuer.spec = {**issuer.spec, "approvalPolicy": {"autoApprove": "all"}}
        issuer.save()
        request = external(issuer)
        step_request(request)
        request.refresh_from_db()
        assert request.approval == Approval.APPROVED and request.decided_by == "policy"

    def test_denied_is_terminal(self) -> None:
        request = external(make_ca_issuer())
        actions.deny(request, "carol", "BadHost", "node-1 is not ours")
        step_request(request)
        request.refresh_from_db()
        assert request.state == RequestState.DENIED
        ready = request.get_condition("Ready")
        assert ready and ready["status"] == "False" and ready["reason"] == "Denied"
        assert "carol" in ready["message"]
        assert request.failure_time is not None
        assert request.certificate_pem == ""
        with pytest.raises(actions.ActionError):
            actions.approve(request, "alice")
        assert step_request(request).requeue_after is None
        request.refresh_from_db()
        assert request.state == RequestState.DENIED


class TestSigning:
    def test_expiration_seconds_honoured(self) -> None:
        request = external(make_ca_issuer(), expirationSeconds=3600)
        actions.approve(request, "alice")
        step_request(request)
        request.refresh_from_db()
        assert lifetime(request) == timedelta(hours=1)

    def test_minimum_ten_minutes(self) -> None:
        request = external(make_ca_issuer(), expirationSeconds=60)
        actions.approve(request, "alice")
        step_request(request)
        request.refresh_from_db()
        assert lifetime(request) == timedelta(minutes=10)

    @override_settings(DEFAULT_MAX_SIGNING_DURATION=timedelta(hours=48))
    def test_default_cap(self) -> None:
        request = external(make_ca_issuer(), duration="2160h")
        actions.approve(request, "alice")
        step_request(request)
        request.refresh_from_db()
        assert lifetime(request) == timedelta(hours=48)

    def test_issuer_cap(self) -> None:
        request = external(make_ca_issuer(maxDuration="24h"), duration="100h")
        actions.approve(request, "alice")
        step_request(request)
        request.refresh_from_db()
        assert lifetime(request) == timedelta(hours=24)
        assert request.ca_pem and request.ca_pem in request.certificate_pem

    def test_external_csr_to_selfsigned_fails(self) -> None:
        request = external(make_selfsigned_issuer())
        actions.approve(request, "alice")
        step_request(request)
        request.refresh_from_db()
        assert request.state == RequestState.FAILED
        ready = request.get_condition("Ready")
        assert ready and ready["reason"] == "Failed" and "NoPrivateKey" in ready["message"]
        assert request.failure_time is not None
        assert Event.objects.filter(name="ext", type=Event.WARNING).exists()

    def test_ca_not_ready_is_temporary(self) -> None:
        issuer = make_ca_issuer(name="later", secret_name="later-ca")
        from issuance.models import Secret

        Secret.objects.filter(name="later-ca").delete()
        request = external(issuer)
        actions.approve(request, "alice")
        request.refresh_from_db()
        with pytest.raises(TemporaryError, match="ErrGetKeyPair"):
            certificaterequests.reconcile(request)
        request.refresh_from_db()
        assert request.state == RequestState.PENDING

    def test_usages_and_is_ca(self) -> None:
        request = external(make_ca_issuer(), usages=["client auth", "digital signature"], isCA=True)
        actions.approve(request, "alice")
        step_request(request)
        request.refresh_from_db()
        cert = leaf(request)
        assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert [u._name for u in eku] == ["clientAuth"]
