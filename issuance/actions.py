"""What people do to resources (API, CLI and web UI all call these): renew, approve, deny."""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, transaction
from django.utils import timezone

from issuance import events
from issuance.fastpaths.model_save import save_where
from issuance.models import Approval, Certificate, CertificateRequest, Event
from issuance.worker.wakeup import wake


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


DECISION_FIELDS = ("approval", "decided_by", "decided_at", "conditions", "updated_at")


def _set_decision(
    cr: CertificateRequest, decision: str, actor: str, reason: str, message: str
) -> None:
    now = timezone.now()
    cr.approval = decision
    cr.decided_by = actor
    cr.decided_at = now
    cr.set_condition(decision, "True", reason, message, now=now, decidedBy=actor)


def _decide(
    request: CertificateRequest, decision: str, actor: str, reason: str, message: str
) -> CertificateRequest:
    cr: CertificateRequest = CertificateRequest.objects.select_for_update().get(pk=request.pk)
    if cr.approval != Approval.PENDING:
        raise ActionError(
            f"CertificateRequest {cr.name} is already {cr.approval}"
            f" by {cr.decided_by or 'policy'}; approval and denial are final"
        )
    _set_decision(cr, decision, actor, reason, message)
    cr.save(update_fields=list(DECISION_FIELDS))
    _record_decision(cr, decision, actor, reason, message)
    wake(cr)
    return cr


def approve_pending(request: CertificateRequest, actor: str, reason: str, message: str) -> bool:
    """Approve a request the caller is reconciling, if nobody decided first.

    For the worker's approver: one conditional UPDATE instead of a lock and a save, and no
    wake-up (the caller goes on to sign in the same pass). When a person decided first,
    `request` is reloaded with their decision and False returned.
    """
    _set_decision(request, Approval.APPROVED, actor, reason, message)
    using = request._state.db or DEFAULT_DB_ALIAS
    if not save_where(request, DECISION_FIELDS, using, approval=Approval.PENDING):
        request.refresh_from_db()
        return False
    _record_decision(request, Approval.APPROVED, actor, reason, message)
    return True


def _record_decision(
    cr: CertificateRequest, decision: str, actor: str, reason: str, message: str
) -> None:
    events.record(
        "CertificateRequest",
        cr.name,
        decision,
        f"{reason}: {message}" if message else reason,
        type_=Event.NORMAL if decision == Approval.APPROVED else Event.WARNING,
        actor=actor,
        certificate_name=cr.certificate.name if cr.certificate_id and cr.certificate else "",
    )


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
