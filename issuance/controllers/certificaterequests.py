"""CertificateRequest controller: approver (by the issuer's policy), then sign via the issuer.

Approved and Denied are final and exclusive (issuance.operations.actions). Denied is terminal and
counts as a failed issuance for the owning Certificate. Signing is dispatched per issuer
kind (issuance.issuers.registry). After a final state the owning Certificate is woken.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone

from issuance import approval
from issuance.controllers import faults
from issuance.controllers.base import Result
from issuance.fastpaths.model_save import save_where
from issuance.issuers import registry
from issuance.issuers.base import SignOutcome, SignState
from issuance.models import (
    Approval,
    CertificateRequest,
    Event,
    Issuer,
    RequestState,
    certificate_name_of,
)
from issuance.observability import events
from issuance.operations import actions
from issuance.worker.wakeup import Wake

POLICY_ACTOR = "policy"
AUTO_APPROVE_VALUES = ("owned", "all", "none")


def auto_approve_policy(issuer: Issuer) -> str:
    """`spec.approvalPolicy.autoApprove`: owned (default), all or none."""
    policy = issuer.typed_spec.get("approvalPolicy") or {}
    value = str(policy.get("autoApprove") or "owned") if isinstance(policy, dict) else "owned"
    return value if value in AUTO_APPROVE_VALUES else "owned"


def policy_approves(request: CertificateRequest) -> bool:
    policy = auto_approve_policy(request.issuer)
    return policy == "all" or (policy == "owned" and request.certificate_id is not None)


def reconcile(request: CertificateRequest) -> Result:
    if request.is_final:
        return Result.done()
    if request.approval == Approval.PENDING:
        waiting = _approve_by_policy(request)
        if waiting is not None:
            return waiting
    if request.approval == Approval.DENIED:
        _finish(request, RequestState.DENIED, _denied_reason(request))
        return Result.done()
    # Approved (now or before): sign in the same pass.
    outcome = registry.sign(request)
    if outcome.state == SignState.PENDING:
        _set_pending(request, outcome.reason or "Pending", outcome.message or "Issuing")
        return Result(outcome.requeue_after)
    store_outcome(request, outcome)
    return Result.done()  # final; the owning Certificate was woken


def _approve_by_policy(request: CertificateRequest) -> Result | None:
    """Decide by the issuer's policy; a Result when the request must wait for a person,
    None when it is decided (by the policy now, or by a person first)."""
    if request.certificate_id is None:  # external CSRs: the issuer's rules (issuance.approval)
        decision = approval.apply(request)
        if decision.outcome == "pending":
            _set_pending(request, "Pending", f"Waiting for approval: {decision.reason}")
            return Result.done()
        request.refresh_from_db()  # the decision (the policy's, or a person's first)
        return None
    if not policy_approves(request):
        _set_pending(request, "Pending", _waiting_message(request))
        return Result.done()  # a person decides; actions.approve/deny wakes us
    actions.approve_pending(
        request,
        POLICY_ACTOR,
        "AutoApproved",
        f"Auto-approved by the approval policy of issuer {request.issuer.name}",
    )
    faults.checkpoint("after-approved")
    return None


# Why a Certificate's request waits for a person, by the issuer's autoApprove value ("owned"
# waits only for requests that no Certificate owns, which do not come here).
_WAITING = {
    "none": "approves no request automatically (autoApprove: none)",
    "owned": "approves only its certificates' requests automatically (autoApprove: owned)",
}


def _waiting_message(request: CertificateRequest) -> str:
    policy = auto_approve_policy(request.issuer)
    why = _WAITING.get(policy, f"autoApprove is {policy}")
    return (
        f"Waiting for a person to approve it: the approval policy of issuer "
        f"{request.issuer.name} {why}"
    )


def _denied_reason(request: CertificateRequest) -> tuple[str, str]:
    cond = request.get_condition("Denied")
    who = request.decided_by or "someone"
    detail = (cond and (cond.get("message") or cond.get("reason"))) or "denied"
    return "Denied", f"Denied by {who}: {detail}"


def _set_pending(request: CertificateRequest, reason: str, message: str) -> None:
    if request.set_condition("Ready", "False", reason, message, now=timezone.now()):
        request.save(update_fields=["conditions", "updated_at"])


def store_outcome(request: CertificateRequest, outcome: SignOutcome) -> bool:
    """Record the signer's final answer, unless the request was finished meanwhile.

    Called by this controller and, for ACME, by the orders controller right after it
    downloaded the chain (instead of waking the request for a pass of its own). Returns
    False when someone else finished the request first.
    """
    if outcome.state == SignState.ISSUED:
        request.certificate_pem = outcome.certificate_pem
        request.ca_pem = outcome.ca_pem
        message = "Certificate fetched from issuer"
        if outcome.shortened:
            message = f"{message}. {outcome.shortened}"
            request.set_condition(
                "DurationCapped", "True", "Shortened", outcome.shortened, now=timezone.now()
            )
        done = _finish(request, RequestState.ISSUED, ("Issued", message))
        if done and outcome.shortened:
            events.record(
                "CertificateRequest",
                request.name,
                "DurationCapped",
                outcome.shortened,
                type_=Event.WARNING,
                certificate_name=certificate_name_of(request),
            )
    else:
        reason = outcome.reason or "Failed"
        message = f"{reason}: {outcome.message}" if outcome.message else reason
        done = _finish(request, RequestState.FAILED, ("Failed", message))
    if done:
        faults.checkpoint("after-signed")
    return done


FINISH_FIELDS = ("state", "failure_time", "certificate_pem", "ca_pem", "conditions", "updated_at")


def _finish(request: CertificateRequest, state: str, why: tuple[str, str]) -> bool:
    """Final state (written only while the row is still Pending), waking the owner with it."""
    reason, message = why
    now = timezone.now()
    request.state = state
    if state != RequestState.ISSUED:
        request.failure_time = now
    request.set_condition(
        "Ready", "True" if state == RequestState.ISSUED else "False", reason, message, now=now
    )
    using = request._state.db or DEFAULT_DB_ALIAS
    owner = request.certificate if request.certificate_id is not None else None
    if not save_where(
        request,
        FINISH_FIELDS,
        using,
        wake=Wake(owner) if owner else None,
        state=RequestState.PENDING,
    ):
        request.refresh_from_db()
        return False
    events.record(
        "CertificateRequest",
        request.name,
        reason,
        message,
        type_=Event.NORMAL if state == RequestState.ISSUED else Event.WARNING,
        certificate_name=certificate_name_of(request),
    )
    return True
