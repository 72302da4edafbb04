"""Approval policies per issuer (`spec.approvalPolicy`), in the spirit of kubelet-csr-approver.

    approvalPolicy:
      autoApprove: owned | all | none        # default owned
      rules: {allowedSignerNames, requesterPattern, commonNameMustMatchRequester,
              dnsSanRegex, maxDnsSans, ipSanCidrs, maxExpirationSeconds,
              requireDnsResolvesToIps}
      deny: [{name, message?, signerNames?, requesterPattern?, groups?,
              commonNamePattern?, dnsSanRegex?, ipSanCidrs?, expirationSecondsAbove?}]

Requests owned by a Certificate (our own controller's) are approved unless autoApprove is
`none`. For other requests (API, bootstrap tokens, Kubernetes CSRs), in order:
1. a deny rule that matches (all its conditions) denies, with the rule's name as reason;
2. `autoApprove: none` leaves the request for a person;
3. with `rules`, the request is approved when every configured check passes, else it
   waits for a person, who sees each check's result and the failing one;
4. without `rules`, `autoApprove: all` approves, anything else waits for a person.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from django.utils import timezone

from issuance.approval.checks import Check, deny_rule_check, run_checks
from issuance.approval.facts import facts_of
from issuance.models import CertificateRequest, Issuer
from issuance.pki.csr import CSRError
from issuance.shapes import ApprovalPolicy, PolicyEvaluation

Outcome = Literal["approve", "deny", "pending"]
AUTO_APPROVE = ("owned", "all", "none")


@dataclass(frozen=True)
class Decision:
    outcome: Outcome
    reason: str
    checks: list[Check] = field(default_factory=list)
    # The deny rule (or "InvalidCSR") that decided a denial.
    rule: str = ""

    def as_dict(self) -> PolicyEvaluation:
        return {
            "outcome": self.outcome,
            "reason": self.reason,
            "rule": self.rule,
            "checks": [c.as_dict() for c in self.checks],
            "evaluatedAt": timezone.now().isoformat(),
        }

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.passed]


def policy_of(issuer: Issuer) -> ApprovalPolicy:
    value = (issuer.typed_spec or {}).get("approvalPolicy") or {}
    return value.copy() if isinstance(value, dict) else {}


def auto_approve_of(policy: ApprovalPolicy) -> str:
    value = str(policy.get("autoApprove") or "owned")
    return value if value in AUTO_APPROVE else "owned"


def evaluate(request: CertificateRequest) -> Decision:
    """Pure evaluation (no writes); DNS lookups only for `requireDnsResolvesToIps`."""
    policy = policy_of(request.issuer)
    auto = auto_approve_of(policy)
    if request.certificate_id is not None:
        if auto == "none":
            return Decision("pending", "autoApprove is none: every request waits for a person")
        return Decision("approve", f"owned by Certificate {request.certificate}")
    try:
        facts = facts_of(request)
    except CSRError as exc:
        return Decision("deny", f"the CSR is invalid: {exc}", rule="InvalidCSR")
    rules = policy.get("rules") or {}
    rules = rules if isinstance(rules, dict) else {}
    deny_rules = [r for r in policy.get("deny") or [] if isinstance(r, dict)]
    deny_checks = [deny_rule_check(rule, facts) for rule in deny_rules]
    checks = run_checks(rules, facts)
    for rule, check in zip(deny_rules, deny_checks, strict=True):
        if not check.passed:
            name = str(rule.get("name") or "unnamed")
            why = str(rule.get("message") or check.detail)
            return Decision(
                "deny", f"deny rule {name!r}: {why}", [*checks, *deny_checks], rule=name
            )
    all_checks = [*checks, *deny_checks]
    if auto == "none":
        return Decision(
            "pending", "autoApprove is none: every request waits for a person", all_checks
        )
    if not rules:
        if auto == "all":
            return Decision("approve", "autoApprove is all", all_checks)
        return Decision(
            "pending",
            "the issuer has no approval rules for requests not owned by a Certificate",
            all_checks,
        )
    failed = [c for c in checks if not c.passed]
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return Decision("pending", f"check {first.name} failed: {first.detail}{more}", all_checks)
    return Decision("approve", f"all {len(checks)} approval checks passed", all_checks)
