"""The approval checks (`approvalPolicy.rules`) and deny-rule matchers (`approvalPolicy.deny`).

A check passes or fails with a detail a person can act on; the approval queue shows
every check, so a failing one says what was expected and what the request had.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from issuance.approval.facts import RequestFacts
from issuance.approval.resolve import ResolveError, resolve_addresses
from issuance.shapes import PolicyCheck


@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str

    def as_dict(self) -> PolicyCheck:
        return {"name": self.name, "passed": self.passed, "detail": self.detail}


CheckFn = Callable[[Any, RequestFacts], Check]


def _networks(cidrs: list[str]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [ipaddress.ip_network(c, strict=False) for c in cidrs]


def _in_any(ip: str, nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    addr = ipaddress.ip_address(ip)
    return any(addr.version == net.version and addr in net for net in nets)


def _fullmatch(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


# -- approve-side checks: every configured one must pass --------------------------------


def allowed_signer_names(value: list[str], f: RequestFacts) -> Check:
    name = "allowedSignerNames"
    if not f.signer_name:
        return Check(name, False, f"the request names no signerName (allowed: {', '.join(value)})")
    ok = f.signer_name in value
    return Check(
        name,
        ok,
        f"signerName {f.signer_name!r} is {'' if ok else 'not '}one of {', '.join(value)}",
    )


def requester_pattern(value: str, f: RequestFacts) -> Check:
    ok = bool(f.requester) and _fullmatch(value, f.requester)
    return Check(
        "requesterPattern",
        ok,
        f"requester {f.requester or '(anonymous)'!r} {'matches' if ok else 'does not match'} "
        f"/{value}/",
    )


def common_name_must_match_requester(value: bool, f: RequestFacts) -> Check:
    name = "commonNameMustMatchRequester"
    if not value:
        return Check(name, True, "not required")
    if not f.requester:
        return Check(name, False, "the request has no requester to compare the commonName with")
    ok = f.common_name == f.requester
    return Check(
        name,
        ok,
        f"commonName {f.common_name or '(empty)'!r} "
        f"{'equals' if ok else 'differs from'} requester {f.requester!r}",
    )


def dns_san_regex(value: str, f: RequestFacts) -> Check:
    bad = [n for n in f.dns_names if not _fullmatch(value, n)]
    if bad:
        return Check("dnsSanRegex", False, f"not matching /{value}/: {', '.join(bad)}")
    return Check(
        "dnsSanRegex",
        True,
        f"all {len(f.dns_names)} DNS names match /{value}/" if f.dns_names else "no DNS names",
    )


def max_dns_sans(value: int, f: RequestFacts) -> Check:
    ok = len(f.dns_names) <= value
    return Check("maxDnsSans", ok, f"{len(f.dns_names)} DNS names (at most {value} allowed)")


def ip_san_cidrs(value: list[str], f: RequestFacts) -> Check:
    nets = _networks(value)
    bad = [ip for ip in f.ip_addresses if not _in_any(ip, nets)]
    if bad:
        return Check("ipSanCidrs", False, f"{', '.join(bad)} not in {', '.join(value)}")
    return Check(
        "ipSanCidrs",
        True,
        f"all {len(f.ip_addresses)} IP addresses are in {', '.join(value)}"
        if f.ip_addresses
        else "no IP addresses",
    )


def max_expiration_seconds(value: int, f: RequestFacts) -> Check:
    if f.expiration_seconds is None:
        return Check(
            "maxExpirationSeconds",
            False,
            f"no lifetime requested (expirationSeconds must be set and at most {value})",
        )
    ok = f.expiration_seconds <= value
    return Check(
        "maxExpirationSeconds",
        ok,
        f"requested {f.expiration_seconds}s ({'within' if ok else 'over'} the {value}s limit)",
    )


def require_dns_resolves_to_ips(value: bool, f: RequestFacts) -> Check:
    """Each DNS name must resolve; with IP SANs, to at least one of them (like
    kubelet-csr-approver: a node may only claim names that point at its own addresses)."""
    name = "requireDnsResolvesToIps"
    if not value:
        return Check(name, True, "not required")
    if not f.dns_names:
        return Check(name, True, "no DNS names to resolve")
    claimed = {str(ipaddress.ip_address(ip)) for ip in f.ip_addresses}
    notes: list[str] = []
    for dns_name in f.dns_names:
        try:
            found = resolve_addresses(dns_name)
        except ResolveError as exc:
            return Check(name, False, str(exc))
        if claimed and not found & claimed:
            return Check(
                name,
                False,
                f"{dns_name} resolves to {', '.join(sorted(found))}, none of the request's "
                f"IP addresses ({', '.join(sorted(claimed))})",
            )
        notes.append(f"{dns_name} → {', '.join(sorted(found))}")
    return Check(name, True, "; ".join(notes))


# Order is the order the approval queue lists them in.
APPROVE_CHECKS: dict[str, CheckFn] = {
    "allowedSignerNames": allowed_signer_names,
    "requesterPattern": requester_pattern,
    "commonNameMustMatchRequester": common_name_must_match_requester,
    "dnsSanRegex": dns_san_regex,
    "maxDnsSans": max_dns_sans,
    "ipSanCidrs": ip_san_cidrs,
    "maxExpirationSeconds": max_expiration_seconds,
    "requireDnsResolvesToIps": require_dns_resolves_to_ips,
}


def run_checks(rules: Mapping[str, object], facts: RequestFacts) -> list[Check]:
    """`rules`: approvalPolicy.rules (ApprovalRules), read by the keys of APPROVE_CHECKS."""
    out: list[Check] = []
    for key, fn in APPROVE_CHECKS.items():
        if key not in rules:
            continue
        try:
            out.append(fn(rules[key], facts))
        except (re.error, ValueError, TypeError) as exc:  # a policy the validator missed
            out.append(Check(key, False, f"policy error: {exc}"))
    return out


# -- deny-rule matchers: a rule matches when ALL its conditions match ------------------


def _match_signer(value: list[str], f: RequestFacts) -> str | None:
    return f"signerName {f.signer_name!r}" if f.signer_name in value else None


def _match_requester(value: str, f: RequestFacts) -> str | None:
    return f"requester {f.requester!r}" if _fullmatch(value, f.requester) else None


def _match_groups(value: list[str], f: RequestFacts) -> str | None:
    hit = sorted(set(value) & set(f.groups))
    return f"group {', '.join(hit)}" if hit else None


def _match_common_name(value: str, f: RequestFacts) -> str | None:
    return f"commonName {f.common_name!r}" if _fullmatch(value, f.common_name) else None


def _match_dns(value: str, f: RequestFacts) -> str | None:
    hit = [n for n in f.dns_names if _fullmatch(value, n)]
    return f"DNS name {', '.join(hit)}" if hit else None


def _match_ip(value: list[str], f: RequestFacts) -> str | None:
    nets = _networks(value)
    hit = [ip for ip in f.ip_addresses if _in_any(ip, nets)]
    return f"IP address {', '.join(hit)}" if hit else None


def _match_expiration(value: int, f: RequestFacts) -> str | None:
    seconds = f.expiration_seconds
    return f"expirationSeconds {seconds}" if seconds is not None and seconds > value else None


DENY_MATCHERS: dict[str, Callable[[Any, RequestFacts], str | None]] = {
    "signerNames": _match_signer,
    "requesterPattern": _match_requester,
    "groups": _match_groups,
    "commonNamePattern": _match_common_name,
    "dnsSanRegex": _match_dns,
    "ipSanCidrs": _match_ip,
    "expirationSecondsAbove": _match_expiration,
}


def deny_rule_check(rule: Mapping[str, object], facts: RequestFacts) -> Check:
    """passed=True means the rule did NOT match (the request is not denied by it).

    `rule`: one of approvalPolicy.deny (DenyRule), read by the keys of DENY_MATCHERS."""
    label = f"deny:{rule.get('name') or 'unnamed'}"
    matched: list[str] = []
    for key, fn in DENY_MATCHERS.items():
        if key not in rule:
            continue
        try:
            hit = fn(rule[key], facts)
        except (re.error, ValueError, TypeError) as exc:
            return Check(label, True, f"policy error, rule ignored: {exc}")
        if hit is None:
            return Check(label, True, f"does not match ({key})")
        matched.append(hit)
    if not matched:
        return Check(label, True, "rule has no conditions, ignored")
    return Check(label, False, "matches " + "; ".join(matched))
