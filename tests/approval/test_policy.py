"""evaluate() decisions, apply() records, and the approver running them in the worker."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from issuance import approval
from issuance.models import Approval, CertificateRequest, Event, Issuer, RequestState
from issuance.specs.errors import SpecError
from issuance.specs.issuer import validate_issuer_spec
from tests.factories import csr_pem, make_ca_issuer, make_certificate
from tests.helpers import drain

pytestmark = pytest.mark.django_db
NODE = "system:node:node-1"
RULES = {
    "allowedSignerNames": ["example.com/serving"],
    "requesterPattern": "system:node:[a-z0-9-]+",
    "commonNameMustMatchRequester": True,
    "dnsSanRegex": r"[a-z0-9-]+\.example\.test",
    "maxDnsSans": 2,
    "ipSanCidrs": ["10.0.0.0/8"],
    "maxExpirationSeconds": 86400,
}


def issuer_with(policy: dict[str, Any] | None) -> Issuer:
    issuer = make_ca_issuer("node-ca", "node-ca-secret")
    if policy is not None:
        issuer.spec = {**issuer.spec, "approvalPolicy": policy}
        issuer.save()
    return issuer


def external(
    issuer: Issuer,
    name: str = "req",
    cn: str = NODE,
    dns: tuple[str, ...] = ("node-1.example.test",),
    ips: tuple[str, ...] = ("10.0.0.5",),
    requester: str = NODE,
    source: str = "bootstrap",
    **spec: Any,
) -> CertificateRequest:
    full = {
        "request": csr_pem(*dns, common_name=cn, ip_addresses=ips),
        "issuerRef": {"name": issuer.name},
        "signerName": "example.com/serving",
        "expirationSeconds": 3600,
        "username": requester,
        "groups": ["system:nodes"],
        **spec,
    }
    return CertificateRequest.objects.create(
        name=name,
        spec=full,
        issuer=issuer,
        requester=requester,
        source=source,
        due_at=timezone.now(),
    )


def test_rules_all_pass_approve() -> None:
    decision = approval.evaluate(external(issuer_with({"rules": RULES})))
    assert decision.outcome == "approve"
    assert decision.reason == "all 7 approval checks passed"
    assert [c.name for c in decision.checks] == list(RULES)
    assert all(c.passed for c in decision.checks)


def test_one_failing_rule_leaves_it_for_a_person() -> None:
    cr = external(issuer_with({"rules": RULES}), dns=("node-1.example.test", "evil.example.org"))
    decision = approval.evaluate(cr)
    assert decision.outcome == "pending"
    assert decision.reason.startswith("check dnsSanRegex failed: not matching")
    assert decision.reason.endswith(": evil.example.org")
    assert [c.name for c in decision.failed] == ["dnsSanRegex"]


def test_deny_rule_denies_with_its_name() -> None:
    policy = {
        "rules": RULES,
        "deny": [
            {"name": "no-public-ips", "ipSanCidrs": ["0.0.0.0/0"], "requesterPattern": "alice"},
            {
                "name": "no-wildcards",
                "message": "wildcards are never issued",
                "dnsSanRegex": r"\*\..*",
            },
        ],
    }
    cr = external(issuer_with(policy), dns=("*.example.test",))
    decision = approval.evaluate(cr)
    assert decision.outcome == "deny"
    assert decision.rule == "no-wildcards"
    assert decision.reason == "deny rule 'no-wildcards': wildcards are never issued"
    deny_checks = {c.name: c.passed for c in decision.checks if c.name.startswith("deny:")}
    assert deny_checks == {"deny:no-public-ips": True, "deny:no-wildcards": False}


def test_auto_approve_modes_for_external_and_owned_requests() -> None:
    issuer = issuer_with({"autoApprove": "none", "rules": RULES})
    cr = external(issuer)
    decision = approval.evaluate(cr)
    assert decision.outcome == "pending" and "autoApprove is none" in decision.reason
    assert all(c.passed for c in decision.checks)  # shown to the person anyway
    issuer.spec["approvalPolicy"] = {"autoApprove": "all"}
    issuer.save()
    assert approval.evaluate(external(issuer, name="b")).outcome == "approve"
    issuer.spec["approvalPolicy"] = {}
    issuer.save()
    pending = approval.evaluate(external(issuer, name="c"))
    assert pending.outcome == "pending" and "no approval rules" in pending.reason
    # Owned requests (our own Certificates): approved unless autoApprove is none.
    cert = make_certificate("web", issuer)
    owned = CertificateRequest.objects.create(
        name="owned", spec={"request": "x"}, issuer=issuer, certificate=cert, revision=1
    )
    assert approval.evaluate(owned).outcome == "approve"
    issuer.spec["approvalPolicy"] = {"autoApprove": "none"}
    issuer.save()
    owned.refresh_from_db()
    assert approval.evaluate(owned).outcome == "pending"


def test_invalid_csr_is_denied() -> None:
    cr = external(issuer_with({"rules": RULES}), request="-----BEGIN CERTIFICATE REQUEST-----x")
    decision = approval.evaluate(cr)
    assert decision.outcome == "deny" and decision.rule == "InvalidCSR"


def test_apply_records_checks_and_decides_through_actions() -> None:
    issuer = issuer_with({"rules": RULES})
    ok = external(issuer, name="ok")
    approval.apply(ok)
    ok.refresh_from_db()
    assert ok.approval == Approval.APPROVED and ok.decided_by == "policy"
    assert ok.policy_checks["outcome"] == "approve"
    assert len(ok.policy_checks["checks"]) == 7
    approved = ok.get_condition("Approved")
    assert approved is not None and approved["reason"] == "AutoApproved"
    waiting = external(issuer, name="waiting", cn="someone-else")
    approval.apply(waiting)
    approval.apply(waiting)  # evaluated again: no second timeline entry
    waiting.refresh_from_db()
    assert waiting.approval == Approval.PENDING
    failed = [c for c in waiting.policy_checks["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["commonNameMustMatchRequester"]
    assert Event.objects.filter(name="waiting", reason="WaitingForApproval").count() == 1


def test_worker_approves_signs_and_denies_by_policy() -> None:
    issuer = issuer_with({"rules": RULES, "deny": [{"name": "no-db", "dnsSanRegex": "db-.*"}]})
    good = external(issuer, name="good")
    bad = external(issuer, name="bad", dns=("db-1.example.test",))
    person = external(issuer, name="person", ips=("192.168.0.9",))
    drain()
    for cr in (good, bad, person):
        cr.refresh_from_db()
    assert (good.approval, good.state) == (Approval.APPROVED, RequestState.ISSUED)
    assert (bad.approval, bad.state) == (Approval.DENIED, RequestState.DENIED)
    denied = bad.get_condition("Denied")
    assert denied is not None and denied["reason"] == "PolicyDenied"
    assert "deny rule 'no-db'" in denied["message"]
    assert person.approval == Approval.PENDING
    ready = person.get_condition("Ready")
    assert ready is not None and "ipSanCidrs" in ready["message"]
    # The timeline says who decided and why.
    event = Event.objects.filter(name="bad", reason="Denied").order_by("created_at", "id")[0]
    assert event.actor == "policy" and "no-db" in event.message


def test_issuer_spec_accepts_and_checks_the_policy() -> None:
    spec = {"selfSigned": {}, "approvalPolicy": {"autoApprove": "owned", "rules": RULES}}
    plan = validate_issuer_spec("x", spec, lookups=False)
    assert plan.spec["approvalPolicy"]["rules"] == RULES
    bad = {
        "selfSigned": {},
        "approvalPolicy": {
            "rules": {"requesterPattern": "(", "ipSanCidrs": ["nope"], "maxExpirationSeconds": 5},
            "deny": [{"name": "a"}, {"requesterPattern": ".*"}, "x"],
        },
    }
    with pytest.raises(SpecError) as err:
        validate_issuer_spec("x", bad, lookups=False)
    paths = set(err.value.as_dict())
    assert {
        "spec.approvalPolicy.rules.requesterPattern",
        "spec.approvalPolicy.rules.ipSanCidrs[0]",
        "spec.approvalPolicy.rules.maxExpirationSeconds",
        "spec.approvalPolicy.deny[0]",
        "spec.approvalPolicy.deny[1].name",
        "spec.approvalPolicy.deny[2]",
    } <= paths
