"""Validating `approvalPolicy.rules` and `approvalPolicy.deny` (the issuer spec validator
calls these through its APPROVAL_POLICY_FIELDS mapping)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from issuance.approval.checks import APPROVE_CHECKS, DENY_MATCHERS
from issuance.shapes import ApprovalRules, DenyRule
from issuance.specs.errors import Errors
from issuance.specs.fields import check_object, opt_bool, opt_int, opt_str, opt_str_list

MAX_DENY_RULES = 50


def _regex(obj: dict[str, Any], key: str, path: str, errors: Errors) -> str | None:
    value = opt_str(obj, key, path, errors, max_len=512)
    if value is None:
        return None
    try:
        re.compile(value)
    except re.error as exc:
        errors.add(f"{path}.{key}", f"not a valid regular expression: {exc}")
        return None
    return value


def _cidrs(obj: dict[str, Any], key: str, path: str, errors: Errors) -> list[str] | None:
    items = opt_str_list(obj, key, path, errors, max_len=64)
    if items is None:
        return None
    out: list[str] = []
    for i, item in enumerate(items):
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError:
            errors.add(f"{path}.{key}[{i}]", f"not a CIDR such as 10.0.0.0/8 (got {item!r})")
    return out


def validate_rules(value: Any, path: str, errors: Errors) -> ApprovalRules | None:
    obj = check_object(value, path, errors, tuple(APPROVE_CHECKS))
    if obj is None:
        return None
    out: ApprovalRules = {}
    signers = opt_str_list(obj, "allowedSignerNames", path, errors, max_len=253)
    if signers is not None:
        out["allowedSignerNames"] = signers
    for key in ("requesterPattern", "dnsSanRegex"):
        pattern = _regex(obj, key, path, errors)
        if pattern is not None:
            out[key] = pattern
    for flag_key in ("commonNameMustMatchRequester", "requireDnsResolvesToIps"):
        flag = opt_bool(obj, flag_key, path, errors)
        if flag is not None:
            out[flag_key] = flag
    max_sans = opt_int(obj, "maxDnsSans", path, errors, minimum=0, maximum=1000)
    if max_sans is not None:
        out["maxDnsSans"] = max_sans
    cidrs = _cidrs(obj, "ipSanCidrs", path, errors)
    if cidrs is not None:
        out["ipSanCidrs"] = cidrs
    max_exp = opt_int(obj, "maxExpirationSeconds", path, errors, minimum=600)
    if max_exp is not None:
        out["maxExpirationSeconds"] = max_exp
    return out


def _deny_rule(value: Any, path: str, errors: Errors) -> DenyRule | None:
    obj = check_object(value, path, errors, ("name", "message", *DENY_MATCHERS))
    if obj is None:
        return None
    name = opt_str(obj, "name", path, errors, max_len=100)
    if name is None:
        if obj.get("name") is None:  # absent or null (a null name dropped the rule unseen)
            errors.add(f"{path}.name", "is required (it is the reason a denied request shows)")
        return None
    out: DenyRule = {"name": name}
    message = opt_str(obj, "message", path, errors, max_len=1000)
    if message:
        out["message"] = message
    for key in ("signerNames", "groups"):
        items = opt_str_list(obj, key, path, errors, max_len=253)
        if items is not None:
            out[key] = items
    for pattern_key in ("requesterPattern", "commonNamePattern", "dnsSanRegex"):
        pattern = _regex(obj, pattern_key, path, errors)
        if pattern is not None:
            out[pattern_key] = pattern
    cidrs = _cidrs(obj, "ipSanCidrs", path, errors)
    if cidrs is not None:
        out["ipSanCidrs"] = cidrs
    above = opt_int(obj, "expirationSecondsAbove", path, errors, minimum=0)
    if above is not None:
        out["expirationSecondsAbove"] = above
    if not any(key in obj for key in DENY_MATCHERS):
        errors.add(
            path,
            f"a deny rule needs at least one condition ({', '.join(DENY_MATCHERS)}); "
            "use requesterPattern '.*' to deny every request",
        )
    return out


def validate_deny(value: Any, path: str, errors: Errors) -> list[DenyRule] | None:
    if not isinstance(value, list):
        errors.add(path, "must be a list of deny rules")
        return None
    if len(value) > MAX_DENY_RULES:
        errors.add(path, f"at most {MAX_DENY_RULES} deny rules")
        return None
    out: list[DenyRule] = []
    names: set[str] = set()
    for i, item in enumerate(value):
        rule = _deny_rule(item, f"{path}[{i}]", errors)
        if rule is None:
            continue
        if rule["name"] in names:
            errors.add(f"{path}[{i}].name", f"duplicate deny rule name {rule['name']!r}")
        names.add(rule["name"])
        out.append(rule)
    return out
