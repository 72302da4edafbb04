"""Resolving a request's DNS names for the `requireDnsResolvesToIps` check.

Uses SELF_CHECK_NAMESERVERS (`host` or `host:port`, comma separated) when set, so the
policy sees the same DNS as the ACME self-checks; else the system resolver.
"""

from __future__ import annotations

import ipaddress

import dns.exception
import dns.resolver
from django.conf import settings

TIMEOUT_SECONDS = 3.0


class ResolveError(Exception):
    pass


def _nameserver(entry: str) -> tuple[str, int]:
    entry = entry.strip()
    if entry.startswith("["):  # [2001:db8::1]:53
        host, _, rest = entry[1:].partition("]")
        return host, int(rest.lstrip(":") or 53)
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host, int(port)
    return entry, 53


def resolver() -> dns.resolver.Resolver:
    servers = list(getattr(settings, "SELF_CHECK_NAMESERVERS", []) or [])
    if not servers:
        res = dns.resolver.Resolver()
    else:
        res = dns.resolver.Resolver(configure=False)
        parsed = [_nameserver(s) for s in servers]
        res.nameservers = [host for host, _ in parsed]
        res.nameserver_ports = {host: port for host, port in parsed}
    res.timeout = TIMEOUT_SECONDS
    res.lifetime = TIMEOUT_SECONDS * 2
    return res


def resolve_addresses(name: str) -> set[str]:
    """A and AAAA addresses of `name`; ResolveError when it has none or DNS fails."""
    res = resolver()
    found: set[str] = set()
    problems: list[str] = []
    for rdtype in ("A", "AAAA"):
        try:
            answer = res.resolve(name, rdtype, search=False)
        except (dns.resolver.NoAnswer, dns.resolver.NXDOMAIN) as exc:
            problems.append(type(exc).__name__)
            continue
        except dns.exception.DNSException as exc:
            raise ResolveError(f"{name}: {rdtype} lookup failed: {exc}") from None
        found.update(str(ipaddress.ip_address(r.to_text())) for r in answer)
    if not found:
        raise ResolveError(f"{name} does not resolve ({', '.join(sorted(set(problems)))})")
    return found
