"""What people do to resources (API, CLI and web UI all call these): renew, approve, deny."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from issuance import events
from issuance.models import Approval, Certificate, CertificateRequest, Event
from issuance.wakeup import wake


class ActionError(Exception):
    """The action does not apply to the object in its current state (→ 409)."""


@transaction.atomic
def force_renew(certificate: Certificate, actor: str) -> Certificate:
    """Issue now, bypassing renewal time and failure backoff; recorded with who and when."""
    cert = Certificate.objects.select_for_update().get(pk=certificate.pk)
    now = timezone.now()
    cert.renew_requested_at = now
    cert.renew_requested_by = actor
    cert.save(update_fields=["renew_requested_at", "renew_requested_by", "updated_at"])
    events.record(
        "Certificate",
        cert.name,
        "ManuallyTriggered",
        "Force renewal requested" + (" during failure backoff" if cert.next_retry_time else ""),
        actor=actor,
        certificate_name=cert.name,
    )
    wake(cert)
    return cert


def _decide(
    request: CertificateRequest, decision: str, actor: str, reason: str, message: str
) -> CertificateRequest:
    cr: CertificateRequest = CertificateRequest.objects.select_for_update().get(pk=request.pk)
    if cr.approval != Approval.PENDING:
        raise ActionError(
            f"CertificateRequest {cr.name} is already {cr.approval}"
            f" by {cr.decided_by or 'policy'}; approval and denial are final"
        )
    now = timezone.now()
    cr.approval = decision
    cr.decided_by = actor
    cr.decided_at = now
    cr.set_condition(decision, "True", reason, message, now=now, decidedBy=actor)
    cr.save(update_fields=["approval", "decided_by", "decided_at", "conditions", "updated_at"])
    events.record(
        "CertificateRequest",
        cr.name,
        decision,
        f"{reason}: {message}" if message else reason,
        type_=Event.NORMAL if decision == Approval.APPROVED else Event.WARNING,
        actor=actor,
        certificate_name=cr.certificate.name if cr.certificate_id and cr.certificate else "",
    )
    wake(cr)
    return cr


@transaction.atomic
def approve(
    request: CertificateRequest, actor: str, reason: str = "Approved", message: str = ""
) -> CertificateRequest:
    return _decide(request, Approval.APPROVED, actor, reason or "Approved", message)


@transaction.atomic
def deny(
    request: CertificateRequest, actor: str, reason: str = "Denied", message: str = ""
) -> CertificateRequest:
    return _decide(request, Approval.DENIED, actor, reason or "Denied", message)
