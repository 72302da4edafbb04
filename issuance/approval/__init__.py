"""Approval policies per issuer: which CertificateRequests are approved, denied, or left
for a person (issuance.approval.policy describes the rules)."""

from issuance.approval.checks import Check
from issuance.approval.decide import POLICY_ACTOR, apply
from issuance.approval.policy import Decision, evaluate

__all__ = ["POLICY_ACTOR", "Check", "Decision", "apply", "evaluate"]
