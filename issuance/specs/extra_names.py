"""A Certificate's `otherNames` (otherName SANs) and `nameConstraints` (a CA's name
constraints), validated and normalized as cert-manager v1.21 defines them."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Final

from issuance.models import IssuerKind
from issuance.shapes import CertificateNames, NameConstraintItem, NameConstraintsSpec, OtherName
from issuance.specs.errors import Errors, SpecError
from issuance.specs.fields import check_object, opt_bool, opt_str, opt_str_list
from issuance.specs.names import dns_name_problem, email_problem

# A dotted OID as X.690 allows it: first arc 0, 1 or 2, at least two arcs, no leading zeros.
_OID = re.compile(r"^[0-2](\.(0|[1-9][0-9]*))+$")
MAX_OTHER_NAME_VALUE: Final = 1024
CONSTRAINT_LISTS: Final = ("dnsDomains", "ipRanges", "emailAddresses", "uriDomains")


def validate_other_names(value: Any, path: str, errors: Errors) -> list[OtherName]:
    """`otherNames`: a list of {oid, utf8Value}, both required (as cert-manager's webhook
    requires them), no two alike."""
    if not isinstance(value, list):
        errors.add(path, "must be a list")
        return []
    out: list[OtherName] = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        obj = check_object(item, where, errors, ("oid", "utf8Value"))
        if obj is None:
            continue
        oid = opt_str(obj, "oid", where, errors, max_len=256)
        text = opt_str(obj, "utf8Value", where, errors, max_len=MAX_OTHER_NAME_VALUE)
        for key in ("oid", "utf8Value"):
            if obj.get(key) is None:
                errors.add(f"{where}.{key}", "is required")
        if oid is not None and not _OID.fullmatch(oid):
            errors.add(f"{where}.oid", f"{oid!r} is not a dotted object identifier (1.2.3.4)")
            continue
        if oid is None or text is None:
            continue
        entry: OtherName = {"oid": oid, "utf8Value": text}
        if entry in out:
            errors.add(where, f"duplicate otherName ({oid}={text!r})")
            continue
        out.append(entry)
    return out


def validate_name_constraints(value: Any, path: str, errors: Errors) -> NameConstraintsSpec:
    """`nameConstraints`: `critical` and at least one of `permitted` / `excluded`, each a
    set of lists (cert-manager: "either permitted or excluded must be set")."""
    before = len(errors.items)
    obj = check_object(value, path, errors, ("critical", "permitted", "excluded"))
    if obj is None:
        return {}
    out: NameConstraintsSpec = {}
    critical = opt_bool(obj, "critical", path, errors)
    if critical is not None:
        out["critical"] = critical
    for key in ("permitted", "excluded"):
        if obj.get(key) is not None:
            item = _constraint_item(obj[key], f"{path}.{key}", errors)
            if item:
                out[key] = item
    if not out.get("permitted") and not out.get("excluded") and len(errors.items) == before:
        errors.add(path, "either permitted or excluded must be set (with at least one name)")
    return out


def _constraint_item(value: Any, path: str, errors: Errors) -> NameConstraintItem:
    obj = check_object(value, path, errors, CONSTRAINT_LISTS)
    if obj is None:
        return {}
    out: NameConstraintItem = {}
    for key in CONSTRAINT_LISTS:
        items = opt_str_list(obj, key, path, errors)
        normalized = [
            name
            for i, raw in enumerate(items or [])
            if (name := _normalize(key, raw, f"{path}.{key}[{i}]", errors)) is not None
        ]
        if normalized:
            out[key] = list(dict.fromkeys(normalized))
    return out


def _normalize(key: str, raw: str, where: str, errors: Errors) -> str | None:
    if key == "ipRanges":
        try:
            # Go's net.ParseCIDR, as cert-manager uses, takes host bits; the extension
            # carries the network.
            return str(ipaddress.ip_network(raw, strict=False))
        except ValueError:
            errors.add(where, f"{raw!r} is not a CIDR range (e.g. 10.0.0.0/8 or 2001:db8::/32)")
            return None
    value = raw.lower() if key != "emailAddresses" else raw
    if key == "emailAddresses" and "@" in value:
        problem = email_problem(value)
        if problem:
            errors.add(where, problem)
            return None
        return value
    # A domain: the name and every name under it; a leading '.' only the names under it.
    domain = value.lower().removeprefix(".")
    problem = dns_name_problem(domain, allow_wildcard=False)
    if problem:
        errors.add(where, f"{raw!r}: {problem}")
        return None
    return value.lower()


def refuse_for_acme(spec: CertificateNames, issuer_kind: str) -> None:
    """An ACME issuer cannot give either: an order names only DNS and IP identifiers
    (RFC 8555; RFC 8738), and ACME CAs refuse a CSR with other SANs and do not sign CA
    certificates. cert-manager lets the order fail at the CA; the console says so before
    anything is stored."""
    if issuer_kind != IssuerKind.ACME:
        return
    errors = [
        (
            f"spec.{key}",
            f"an ACME issuer cannot issue {what}: ACME orders carry only DNS names and IP "
            "addresses (use a ca or selfSigned issuer)",
        )
        for key, what in (
            ("otherNames", "otherName SANs"),
            ("nameConstraints", "name-constrained CA certificates"),
        )
        if spec.get(key)
    ]
    if errors:
        raise SpecError(errors)
