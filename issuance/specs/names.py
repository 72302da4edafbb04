"""Names that end up in certificates: DNS names, IP addresses, e-mail addresses, URIs."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from issuance.specs.errors import Errors

MAX_DNS_NAME = 253
MAX_LABEL = 63
_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_EMAIL_LOCAL = re.compile(r"^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]{1,64}$")


def is_ip_address(value: str) -> bool:
    try:
        ipaddress.ip_address(value.strip("[]"))
    except ValueError:
        return False
    return True


def dns_name_problem(name: str, *, allow_wildcard: bool = True) -> str | None:
    """Why `name` (already lower-cased) is not an RFC 1123 DNS name, or None if it is."""
    if not name:
        return "must not be empty"
    if is_ip_address(name):
        return f"{name!r} is an IP address: put it in ipAddresses instead of dnsNames"
    if not name.isascii():
        return f"{name!r} is not ASCII: use the IDNA (xn--) form"
    if len(name) > MAX_DNS_NAME:
        return f"must be at most {MAX_DNS_NAME} characters (got {len(name)})"
    labels = name.split(".")
    if labels[0] == "*":
        if not allow_wildcard:
            return "wildcards are not allowed here"
        labels = labels[1:]
        if not labels:
            return "a wildcard needs a domain after '*.' (e.g. '*.example.com')"
    for label in labels:
        if "*" in label:
            return f"{name!r}: a wildcard must be the whole leftmost label ('*.example.com')"
        if not label:
            return f"{name!r} has an empty label (leading, trailing or double dot)"
        if len(label) > MAX_LABEL:
            return f"label {label[:20]!r}… is longer than {MAX_LABEL} characters"
        if not _LABEL.fullmatch(label):  # match()'s $ lets a trailing newline through
            return (
                f"{name!r}: label {label!r} must contain only letters, digits and '-', "
                "and must not start or end with '-'"
            )
    if labels[-1].isdigit():
        return f"{name!r}: the top-level label must not be all digits"
    return None


def normalize_dns_names(values: list[str], path: str, errors: Errors) -> list[str]:
    """Lower-case, validate and de-duplicate; `path` is e.g. "spec.dnsNames"."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(values):
        name = raw.lower()
        problem = dns_name_problem(name)
        if problem:
            errors.add(f"{path}[{i}]", problem)
            continue
        if name in seen:
            errors.add(f"{path}[{i}]", f"duplicate of {path}[{seen[name]}] ({name!r})")
            continue
        seen[name] = i
        out.append(name)
    return out


def normalize_ip_addresses(values: list[str], path: str, errors: Errors) -> list[str]:
    out: list[str] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(values):
        try:
            ip = str(ipaddress.ip_address(raw))
        except ValueError:
            errors.add(f"{path}[{i}]", f"{raw!r} is not an IPv4 or IPv6 address")
            continue
        if ip in seen:
            errors.add(f"{path}[{i}]", f"duplicate of {path}[{seen[ip]}] ({ip})")
            continue
        seen[ip] = i
        out.append(ip)
    return out


def email_problem(value: str) -> str | None:
    local, at, domain = value.rpartition("@")
    if not at or not _EMAIL_LOCAL.fullmatch(local):
        return f"{value!r} is not an e-mail address"
    problem = dns_name_problem(domain.lower(), allow_wildcard=False)
    return f"{value!r}: domain {problem}" if problem else None


def normalize_emails(values: list[str], path: str, errors: Errors) -> list[str]:
    out: list[str] = []
    for i, value in enumerate(values):
        problem = email_problem(value)
        if problem:
            errors.add(f"{path}[{i}]", problem)
        elif value in out:
            errors.add(f"{path}[{i}]", f"duplicate e-mail address {value!r}")
        else:
            out.append(value)
    return out


def normalize_uris(values: list[str], path: str, errors: Errors) -> list[str]:
    out: list[str] = []
    for i, value in enumerate(values):
        try:
            parts = urlsplit(value)
        except ValueError:
            errors.add(f"{path}[{i}]", f"{value!r} is not a valid URI")
            continue
        if not parts.scheme or not (parts.netloc or parts.path) or re.search(r"\s", value):
            errors.add(f"{path}[{i}]", f"{value!r} is not an absolute URI (e.g. spiffe://…)")
        elif value in out:
            errors.add(f"{path}[{i}]", f"duplicate URI {value!r}")
        else:
            out.append(value)
    return out
