"""Helpers for driving the certificate lifecycle in tests."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from issuance.controllers import certificaterequests, certificates
from issuance.controllers.base import Result
from issuance.models import Certificate, CertificateRequest, Issuer
from issuance.operations import actions
from issuance.pki.csr import parse_csr
from issuance.pki.keys import public_key_bytes, validate_private_key
from issuance.worker.wakeup import wake


def step(cert: Certificate) -> Result:
    cert.refresh_from_db()
    return certificates.reconcile(cert)


def step_request(request: CertificateRequest) -> Result:
    request.refresh_from_db()
    return certificaterequests.reconcile(request)


def manual_issuer(name: str = "manual", kind: str = "selfSigned", **kind_spec: Any) -> Issuer:
    """An issuer whose requests all wait for a person (approvalPolicy.autoApprove none)."""
    return Issuer.objects.create(
        name=name,
        kind=kind,
        spec={kind: kind_spec, "approvalPolicy": {"autoApprove": "none"}},
    )


def requests_of(cert: Certificate) -> list[CertificateRequest]:
    return list(CertificateRequest.objects.filter(certificate=cert).order_by("revision"))


def latest_request(cert: Certificate) -> CertificateRequest:
    request = CertificateRequest.objects.filter(certificate=cert).order_by("-revision").first()
    assert request is not None
    return request


def deny_latest(cert: Certificate, message: str = "not today") -> CertificateRequest:
    return actions.deny(latest_request(cert), "alice", "Denied", message)


def approve_latest(cert: Certificate) -> CertificateRequest:
    return actions.approve(latest_request(cert), "alice")


def change_spec(cert: Certificate, **changes: Any) -> Certificate:
    """What the API does on an edit: new spec, generation + 1, wake."""
    cert.refresh_from_db()
    cert.spec = {**cert.spec, **changes}
    cert.generation += 1
    if "secretName" in changes:
        cert.secret_name = changes["secretName"]
    cert.save()
    wake(cert)
    return cert


def move_failure_back(cert: Certificate, by: timedelta) -> None:
    """Pretend the last failure happened `by` earlier (time travel for backoff)."""
    cert.refresh_from_db()
    assert cert.last_failure_time is not None
    when = cert.last_failure_time - by
    Certificate.objects.filter(pk=cert.pk).update(last_failure_time=when, due_at=timezone.now())
    # the failed request finished even earlier
    CertificateRequest.objects.filter(certificate=cert, failure_time__isnull=False).update(
        failure_time=when - timedelta(seconds=1)
    )


def csr_key_der(request: CertificateRequest) -> bytes:
    return parse_csr(request.csr_pem).public_key_der


def key_der(pem: str) -> bytes:
    return public_key_bytes(validate_private_key(pem, "test").public_key())
