"""Every approval check and deny matcher, each both ways (pure: no database, no DNS)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from issuance.approval.checks import APPROVE_CHECKS, DENY_MATCHERS, deny_rule_check, run_checks
from issuance.approval.facts import RequestFacts

NODE = RequestFacts(
    requester="system:node:node-1",
    groups=["system:nodes", "system:authenticated"],
    signer_name="example.com/kubelet-serving",
    common_name="system:node:node-1",
    dns_names=["node-1.example.test", "node-1"],
    ip_addresses=["10.0.0.5", "fd00::5"],
    usages=["digital signature", "server auth"],
    expiration_seconds=86400,
)


def facts(**changes: Any) -> RequestFacts:
    return dataclasses.replace(NODE, **changes)


def only(rules: dict[str, Any], f: RequestFacts) -> tuple[bool, str]:
    checks = run_checks(rules, f)
    assert len(checks) == 1 and checks[0].name == next(iter(rules))
    return checks[0].passed, checks[0].detail


# (rule, value, facts that pass, facts that fail, words the failure detail contains)
CASES: list[tuple[str, Any, RequestFacts, RequestFacts, str]] = [
    (
        "allowedSignerNames",
        ["example.com/kubelet-serving"],
        NODE,
        facts(signer_name="example.com/other"),
        "example.com/other",
    ),
    (
        "requesterPattern",
        r"system:node:[a-z0-9-]+",
        NODE,
        facts(requester="system:serviceaccount:default:x"),
        "does not match",
    ),
    (
        "commonNameMustMatchRequester",
        True,
        NODE,
        facts(common_name="system:node:node-2"),
        "differs from",
    ),
    (
        "dnsSanRegex",
        r"node-1(\.example\.test)?",
        NODE,
        facts(dns_names=["node-1.example.test", "evil.example.com"]),
        "evil.example.com",
    ),
    ("maxDnsSans", 2, NODE, facts(dns_names=["a.test", "b.test", "c.test"]), "3 DNS names"),
    (
        "ipSanCidrs",
        ["10.0.0.0/8", "fd00::/8"],
        NODE,
        facts(ip_addresses=["10.0.0.5", "192.168.1.1"]),
        "192.168.1.1",
    ),
    (
        "maxExpirationSeconds",
        86400,
        NODE,
        facts(expiration_seconds=86401),
        "over",
    ),
]


@pytest.mark.parametrize(
    ("rule", "value", "good", "bad", "words"), CASES, ids=[c[0] for c in CASES]
)
def test_check_passes_and_fails(
    rule: str, value: Any, good: RequestFacts, bad: RequestFacts, words: str
) -> None:
    passed, detail = only({rule: value}, good)
    assert passed, detail
    passed, detail = only({rule: value}, bad)
    assert not passed
    assert words in detail


def test_every_check_is_covered() -> None:
    covered = {c[0] for c in CASES} | {"requireDnsResolvesToIps"}  # DNS: test_dns_check.py
    assert covered == set(APPROVE_CHECKS)


def test_edge_cases_of_checks() -> None:
    assert not only({"allowedSignerNames": ["a/b"]}, facts(signer_name=""))[0]
    assert not only({"requesterPattern": ".*"}, facts(requester=""))[0]  # anonymous never
    assert not only({"requesterPattern": "system:node"}, NODE)[0]  # full match, not search
    assert only({"commonNameMustMatchRequester": False}, facts(common_name="x"))[0]
    assert not only({"commonNameMustMatchRequester": True}, facts(requester=""))[0]
    assert only({"dnsSanRegex": "x"}, facts(dns_names=[]))[0]
    assert only({"maxDnsSans": 0}, facts(dns_names=[]))[0]
    assert only({"ipSanCidrs": ["10.0.0.0/8"]}, facts(ip_addresses=[]))[0]
    # An IPv4 address is never inside an IPv6 network, and vice versa.
    assert not only({"ipSanCidrs": ["::/0"]}, facts(ip_addresses=["10.0.0.5"]))[0]
    passed, detail = only({"maxExpirationSeconds": 3600}, facts(expiration_seconds=None))
    assert not passed and "no lifetime requested" in detail
    assert only({"maxExpirationSeconds": 3600}, facts(expiration_seconds=3600))[0]
    assert only({"requireDnsResolvesToIps": False}, NODE)[0]
    assert only({"requireDnsResolvesToIps": True}, facts(dns_names=[]))[0]
    # A broken regex in a stored policy fails the check instead of crashing the controller.
    passed, detail = only({"dnsSanRegex": "("}, NODE)
    assert not passed and "policy error" in detail


def test_checks_run_in_a_stable_order_and_all_pass_for_a_good_node() -> None:
    rules = {c[0]: c[1] for c in CASES}
    checks = run_checks(rules, NODE)
    assert [c.name for c in checks] == [n for n in APPROVE_CHECKS if n in rules]
    assert all(c.passed for c in checks), [c.detail for c in checks if not c.passed]


DENY_CASES: list[tuple[str, Any, RequestFacts, RequestFacts]] = [
    ("signerNames", ["example.com/kubelet-serving"], NODE, facts(signer_name="x/y")),
    ("requesterPattern", "system:node:.*", NODE, facts(requester="alice")),
    ("groups", ["system:nodes"], NODE, facts(groups=["system:authenticated"])),
    ("commonNamePattern", "system:node:node-1", NODE, facts(common_name="node-2")),
    (r"dnsSanRegex", r".*\.example\.test", NODE, facts(dns_names=["node-1.other"])),
    ("ipSanCidrs", ["10.0.0.0/24"], NODE, facts(ip_addresses=["10.9.0.5"])),
    ("expirationSecondsAbove", 3600, NODE, facts(expiration_seconds=3600)),
]


@pytest.mark.parametrize(
    ("key", "value", "matching", "other"), DENY_CASES, ids=[c[0] for c in DENY_CASES]
)
def test_deny_matcher_matches_and_not(
    key: str, value: Any, matching: RequestFacts, other: RequestFacts
) -> None:
    rule = {"name": "r", key: value}
    hit = deny_rule_check(rule, matching)
    assert not hit.passed and hit.name == "deny:r" and hit.detail.startswith("matches")
    miss = deny_rule_check(rule, other)
    assert miss.passed and key in miss.detail


def test_every_deny_matcher_is_covered() -> None:
    assert {c[0] for c in DENY_CASES} == set(DENY_MATCHERS)


def test_deny_rule_needs_all_conditions() -> None:
    rule = {"name": "wild", "requesterPattern": "system:node:.*", "dnsSanRegex": r"\*\..*"}
    assert deny_rule_check(rule, NODE).passed  # requester matches, no wildcard
    assert not deny_rule_check(rule, facts(dns_names=["*.example.test"])).passed
    assert deny_rule_check({"name": "empty"}, NODE).passed  # no conditions: ignored
