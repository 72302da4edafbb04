"""CertificateRequest controller: approver (by the issuer's policy), then sign via the issuer.

Approved and Denied are final and exclusive (issuance.actions). Denied is terminal and
counts as a failed issuance for the owning Certificate. Signing is dispatched per issuer
kind (issuance.issuers.registry). After a final state the owning Certificate is woken.
"""

from __future__ import annotations

import contextlib

from django.db import transaction
from django.utils import timezone

from issuance import actions, approval, events, faults
from issuance.controllers.base import Result
from issuance.issuers import registry
from issuance.issuers.base import SignOutcome, SignState
from issuance.models import Approval, CertificateRequest, Event, Issuer, RequestState
from issuance.wakeup import wake

POLICY_ACTOR = "policy"
AUTO_APPROVE_VALUES = ("owned", "all", "none")


def auto_approve_policy(issuer: Issuer) -> str:
    """`spec.approvalPolicy.autoApprove`: owned (default), all or none."""
    policy = issuer.spec.get("approvalPolicy") or {}
    value = str(policy.get("autoApprove") or "owned") if isinstance(policy, dict) else "owned"
    return value if value in AUTO_APPROVE_VALUES else "owned"


def policy_approves(request: CertificateRequest) -> bool:
    policy = auto_approve_policy(request.issuer)
    return policy == "all" or (policy == "owned" and request.certificate_id is not None)


def reconcile(request: CertificateRequest) -> Result:
    if request.is_final:
        return Result.done()
    if request.approval == Approval.PENDING:
        return _approve_by_policy(request)
    if request.approval == Approval.DENIED:
        _finish(request, RequestState.DENIED, _denied_reason(request))
        return Result.now()
    outcome = registry.sign(request)
    if outcome.state == SignState.PENDING:
        _set_pending(request, outcome.reason or "Pending", outcome.message or "Issuing")
        return Result(outcome.requeue_after)
    _store_outcome(request, outcome)
    faults.checkpoint("after-signed")
    return Result.done()  # final; the owning Certificate was woken


def _approve_by_policy(request: CertificateRequest) -> Result:
    if request.certificate_id is None:  # external CSRs: the issuer's rules (issuance.approval)
        decision = approval.apply(request)
        if decision.outcome == "pending":
            _set_pending(request, "Pending", f"Waiting for approval: {decision.reason}")
            return Result.done()
        return Result.now()
    if not policy_approves(request):
        _set_pending(
            request,
            "Pending",
            f"Waiting for approval (issuer {request.issuer.name} approves "
            f"{auto_approve_policy(request.issuer)} requests automatically)",
        )
        return Result.done()  # a person decides; actions.approve/deny wakes us
    # A person may have decided first; the next pass sees their decision.
    with contextlib.suppress(actions.ActionError):
        actions.approve(
            request,
            POLICY_ACTOR,
            "AutoApproved",
            f"Auto-approved by the approval policy of issuer {request.issuer.name}",
        )
    faults.checkpoint("after-approved")
    return Result.now()


def _denied_reason(request: CertificateRequest) -> tuple[str, str]:
    cond = request.get_condition("Denied") or {}
    who = request.decided_by or "someone"
    detail = cond.get("message") or cond.get("reason") or "denied"
    return "Denied", f"Denied by {who}: {detail}"


def _set_pending(request: CertificateRequest, reason: str, message: str) -> None:
    if request.set_condition("Ready", "False", reason, message, now=timezone.now()):
        request.save(update_fields=["conditions", "updated_at"])


@transaction.atomic
def _store_outcome(request: CertificateRequest, outcome: SignOutcome) -> None:
    if outcome.state == SignState.ISSUED:
        request.certificate_pem = outcome.certificate_pem
        request.ca_pem = outcome.ca_pem
        _finish(request, RequestState.ISSUED, ("Issued", "Certificate fetched from issuer"))
    else:
        reason = outcome.reason or "Failed"
        message = f"{reason}: {outcome.message}" if outcome.message else reason
        _finish(request, RequestState.FAILED, ("Failed", message))


@transaction.atomic
def _finish(request: CertificateRequest, state: str, why: tuple[str, str]) -> None:
    reason, message = why
    now = timezone.now()
    request.state = state
    if state != RequestState.ISSUED:
        request.failure_time = now
    request.set_condition(
        "Ready", "True" if state == RequestState.ISSUED else "False", reason, message, now=now
    )
    request.save(
        update_fields=[
            "state",
            "failure_time",
            "certificate_pem",
            "ca_pem",
            "conditions",
            "updated_at",
        ]
    )
    events.record(
        "CertificateRequest",
        request.name,
        reason,
        message,
        type_=Event.NORMAL if state == RequestState.ISSUED else Event.WARNING,
        certificate_name=request.certificate.name if request.certificate else "",
    )
    if request.certificate_id is not None:
        wake(request.certificate)  # type: ignore[arg-type]
