"""Acting on a policy Decision: store the checks on the request, then approve or deny."""

from __future__ import annotations

from issuance.approval.policy import Decision, evaluate
from issuance.models import CertificateRequest, Event
from issuance.observability import events
from issuance.operations import actions

POLICY_ACTOR = "policy"


def apply(request: CertificateRequest) -> Decision:
    """Evaluate the issuer's policy for a Pending request, record the checks, and decide.

    A person may decide at the same moment: their decision wins (actions are final), and
    the policy's is dropped without error.
    """
    decision = evaluate(request)
    stored = decision.as_dict()
    previous = request.typed_policy_checks
    said_before = (previous.get("outcome"), previous.get("reason")) if previous else None
    CertificateRequest.objects.filter(pk=request.pk).update(policy_checks=stored)
    request.policy_checks = stored
    issuer = request.issuer.name
    try:
        if decision.outcome == "approve":
            actions.approve(
                request,
                POLICY_ACTOR,
                "AutoApproved",
                f"Approved by the approval policy of issuer {issuer}: {decision.reason}",
            )
        elif decision.outcome == "deny":
            actions.deny(
                request,
                POLICY_ACTOR,
                "PolicyDenied",
                f"Denied by the approval policy of issuer {issuer}: {decision.reason}",
            )
    except actions.ActionError:
        return decision
    if decision.outcome == "pending" and said_before != ("pending", decision.reason):
        events.record(
            "CertificateRequest",
            request.name,
            "WaitingForApproval",
            f"Issuer {issuer} policy: {decision.reason}",
            type_=Event.NORMAL,
            actor=POLICY_ACTOR,
            certificate_name=request.certificate.name if request.certificate else "",
        )
    return decision
