"""Builders for web console tests: certificates in every state, requests, orders, challenges."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from issuance.models import (
    Certificate,
    CertificateRequest,
    Challenge,
    Event,
    Issuer,
    Order,
)
from tests.factories import csr_pem, make_certificate


def ready_certificate(name: str, issuer: Issuer, days_left: int = 60) -> Certificate:
    now = timezone.now()
    cert = make_certificate(name, issuer)
    cert.state = "Ready"
    cert.not_before = now - timedelta(days=30)
    cert.not_after = now + timedelta(days=days_left)
    cert.renewal_time = cert.not_after - timedelta(days=30)
    cert.revision = 1
    cert.set_condition("Ready", "True", "Ready", "Certificate is up to date and has not expired")
    cert.save()
    return cert


def backoff_certificate(name: str, issuer: Issuer, attempts: int = 2) -> Certificate:
    now = timezone.now()
    cert = make_certificate(name, issuer)
    cert.state = "Failed"
    cert.failed_issuance_attempts = attempts
    cert.last_failure_time = now - timedelta(minutes=5)
    cert.next_retry_time = now + timedelta(hours=2 ** (attempts - 1)) - timedelta(minutes=5)
    cert.set_condition("Ready", "False", "Failed", "The CA refused: rejectedIdentifier")
    cert.save()
    return cert


def pending_request(
    name: str,
    issuer: Issuer,
    *,
    common_name: str = "kubelet-node-1",
    requester: str = "system:node:node-1",
    certificate: Certificate | None = None,
) -> CertificateRequest:
    return CertificateRequest.objects.create(
        name=name,
        issuer=issuer,
        certificate=certificate,
        revision=1 if certificate else None,
        requester=requester,
        source="api",
        spec={
            "request": csr_pem("node-1.example.test", common_name=common_name),
            "duration": "720h",
        },
    )


def acme_chain(cert: Certificate, issuer: Issuer) -> tuple[CertificateRequest, Order, Challenge]:
    """A request → order → challenge chain in flight (self-check failing), without ACME."""
    cr = CertificateRequest.objects.create(
        name=f"{cert.name}-1",
        issuer=issuer,
        certificate=cert,
        revision=1,
        requester="issuance",
        source="certificate",
        approval="Approved",
        spec={"request": csr_pem(*cert.dns_names)},
    )
    order = Order.objects.create(
        name=f"{cert.name}-1-order",
        request=cr,
        issuer=issuer,
        spec={"dnsNames": cert.dns_names},
        state="pending",
        url="https://acme.example.test/order/1",
    )
    now = timezone.now()
    challenge = Challenge.objects.create(
        name=f"{cert.name}-1-order-chal",
        order=order,
        issuer=issuer,
        dns_name=cert.dns_names[0],
        type="http-01",
        authorization_url="https://acme.example.test/authz/1",
        token="tok-" + cert.name,
        spec={"dnsName": cert.dns_names[0], "type": "http-01"},
        processing=True,
        scheduled_at=now - timedelta(seconds=30),
        presented=True,
        presented_at=now - timedelta(seconds=25),
        state="pending",
        reason="self check failed: wrong status code 404",
        next_check_at=now + timedelta(seconds=10),
        attempts=3,
    )
    Event.objects.create(
        kind="Challenge",
        name=challenge.name,
        certificate_name=cert.name,
        reason="Presented",
        message="Presented the HTTP-01 token",
    )
    return cr, order, challenge
