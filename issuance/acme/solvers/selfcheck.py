"""Self-checks: does the world see the challenge answer the way the CA will?

HTTP-01: GET http://<dnsName>:<HTTP01_SELF_CHECK_PORT>/.well-known/acme-challenge/<token>,
the name resolved via SELF_CHECK_NAMESERVERS (else the system resolver), expecting the key
authorization. DNS-01: the TXT record at every authoritative nameserver of the zone (found
by an SOA walk, then NS), or at SELF_CHECK_NAMESERVERS when set (split-horizon, tests).

Each check returns None when it passes, else a short reason an operator can act on. A
nameserver that does not answer (down, stopped, unreachable) is named in the reason with
what happened ("nameserver 10.0.0.53:53 did not answer within 10s"), so the challenge
shows it; the challenges controller checks again every SELF_CHECK_INTERVAL.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from urllib.parse import urljoin, urlsplit

import dns.exception
import dns.message
import dns.name
import dns.nameserver
import dns.query
import dns.rcode
import dns.rdatatype
import dns.resolver
from django.conf import settings

from issuance.acme.solvers.base import parse_hostport, resolve_ip

TIMEOUT = 10.0
MAX_REDIRECTS = 10
MAX_BODY = 4096


class DnsAnswerError(Exception):
    """A nameserver answered with an error code (SERVFAIL, REFUSED, …)."""


def describe_dns_error(exc: BaseException, where: str) -> str:
    """What went wrong asking `where` (a nameserver, or the self-check resolver), in words."""
    if isinstance(exc, dns.resolver.LifetimeTimeout | dns.exception.Timeout):
        return f"{where} did not answer within {TIMEOUT:g}s ({type(exc).__name__})"
    if isinstance(exc, dns.resolver.NoNameservers):
        return f"{where} gave no usable answer: {exc}"
    if isinstance(exc, OSError):
        return f"{where}: {exc.strerror or exc}".rstrip()
    return f"{where}: {type(exc).__name__}: {exc}"


def _servers_text() -> str:
    configured: list[str] = list(settings.SELF_CHECK_NAMESERVERS)
    return f"nameserver {', '.join(configured)}" if configured else "the system resolver"


def resolver() -> dns.resolver.Resolver:
    """The resolver self-checks use: SELF_CHECK_NAMESERVERS ("host:port", …) or the system's."""
    configured: list[str] = list(settings.SELF_CHECK_NAMESERVERS)
    if not configured:
        res = dns.resolver.Resolver()
    else:
        res = dns.resolver.Resolver(configure=False)
        servers: list[str | dns.nameserver.Nameserver] = []
        for entry in configured:
            host, port = parse_hostport(entry)
            servers.append(dns.nameserver.Do53Nameserver(resolve_ip(host), port))
        res.nameservers = servers
    res.lifetime = TIMEOUT
    res.cache = None
    return res


class ResolveError(Exception):
    """The self-check resolver could not resolve a name (its text says why and where)."""


def resolve_addresses(name: str) -> list[str]:
    """IPv4 then IPv6 addresses of `name` as the self-check sees them."""
    if not settings.SELF_CHECK_NAMESERVERS:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
        ordered = sorted(infos, key=lambda info: info[0] != socket.AF_INET)
        return list(dict.fromkeys(str(info[4][0]) for info in ordered))
    res = resolver()
    found: list[str] = []
    for rdtype in ("A", "AAAA"):
        try:
            found += [r.to_text() for r in res.resolve(name, rdtype)]
        except (dns.resolver.NoAnswer, dns.resolver.NXDOMAIN):
            continue
    return found


# -- HTTP-01 -------------------------------------------------------------------------


def _fetch(url: str) -> tuple[int, str, str]:
    """GET `url` connecting to the self-check resolver's address; (status, body, location)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    default_port = 443 if parts.scheme == "https" else 80
    port = parts.port or default_port
    try:
        addresses = resolve_addresses(host)
    except dns.exception.DNSException as exc:
        raise ResolveError(
            f"resolving {host}: {describe_dns_error(exc, _servers_text())}"
        ) from None
    if not addresses:
        raise OSError(f"no address for {host}")
    conn: http.client.HTTPConnection
    if parts.scheme == "https":
        # Like the CA's validation: a redirect to HTTPS is followed without verifying the cert.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        conn = http.client.HTTPSConnection(addresses[0], port, timeout=TIMEOUT, context=context)
    else:
        conn = http.client.HTTPConnection(addresses[0], port, timeout=TIMEOUT)
    try:
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        host_header = host if port == default_port else f"{host}:{port}"
        conn.request("GET", path or "/", headers={"Host": host_header, "Accept": "*/*"})
        response = conn.getresponse()
        body = response.read(MAX_BODY).decode(errors="replace")
        return response.status, body, response.getheader("Location") or ""
    finally:
        conn.close()


def check_http01(dns_name: str, token: str, expected: str) -> str | None:
    port: int = settings.HTTP01_SELF_CHECK_PORT
    url = f"http://{dns_name}:{port}/.well-known/acme-challenge/{token}"
    if port == 80:
        url = f"http://{dns_name}/.well-known/acme-challenge/{token}"
    try:
        for _ in range(MAX_REDIRECTS + 1):
            status, body, location = _fetch(url)
            if status in (301, 302, 303, 307, 308) and location:
                url = urljoin(url, location)
                continue
            if status != 200:
                return f"GET {url}: wrong status code '{status}', expected '200'"
            if body.strip() != expected:
                got = body.strip()[:100]
                return f'GET {url}: did not get the expected response: expected "{expected}" but got "{got}"'
            return None
        return f"GET {url}: too many redirects"
    except ResolveError as exc:
        return f"GET {url}: {exc}"
    except (OSError, http.client.HTTPException, dns.exception.DNSException) as exc:
        return f"GET {url}: {type(exc).__name__}: {exc}"


# -- DNS-01 --------------------------------------------------------------------------


def find_zone(fqdn: str, res: dns.resolver.Resolver) -> dns.name.Name:
    """The zone `fqdn` lives in (SOA walk; authority-section SOAs count)."""
    return dns.resolver.zone_for_name(fqdn, resolver=res)


def authoritative_nameservers(
    fqdn: str, res: dns.resolver.Resolver, port: int = 53
) -> list[tuple[str, int]]:
    """(address, port) of every nameserver the zone of `fqdn` delegates to."""
    zone = find_zone(fqdn, res)
    servers: list[tuple[str, int]] = []
    for ns in res.resolve(zone, "NS"):
        target = ns.to_text()
        for rdtype in ("A", "AAAA"):
            try:
                servers += [(r.to_text(), port) for r in res.resolve(target, rdtype)]
            except (dns.resolver.NoAnswer, dns.resolver.NXDOMAIN):
                continue
    return servers


class NameserverError(Exception):
    """A nameserver asked directly did not answer (its text says which and how)."""


def query_txt(fqdn: str, address: str, port: int) -> list[str]:
    """TXT strings at `fqdn` asked directly of one server (TCP when the answer is truncated)."""
    request = dns.message.make_query(fqdn, dns.rdatatype.TXT)
    try:
        response, _ = dns.query.udp_with_fallback(request, address, port=port, timeout=TIMEOUT)
    except (OSError, dns.exception.DNSException) as exc:
        raise NameserverError(describe_dns_error(exc, f"nameserver {address}:{port}")) from None
    rcode = response.rcode()
    if rcode not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
        raise DnsAnswerError(f"{dns.rcode.to_text(rcode)} from {address}:{port}")
    values: list[str] = []
    for rrset in response.answer:
        if rrset.rdtype == dns.rdatatype.TXT:
            values += [b"".join(r.strings).decode(errors="replace") for r in rrset]
    return values


def check_dns01(
    fqdn: str,
    value: str,
    res: dns.resolver.Resolver | None = None,
    authoritative_port: int = 53,
) -> str | None:
    """Every server must have `value`: SELF_CHECK_NAMESERVERS, else the zone's nameservers
    (found with `res`, default the self-check resolver, and asked on `authoritative_port`)."""
    configured: list[str] = list(settings.SELF_CHECK_NAMESERVERS)
    try:
        if configured and res is None:
            servers = [
                (resolve_ip(host), port) for host, port in (parse_hostport(s) for s in configured)
            ]
        else:
            servers = authoritative_nameservers(fqdn, res or resolver(), authoritative_port)
        if not servers:
            return f"no nameservers found for {fqdn}"
        for address, port in servers:
            values = query_txt(fqdn, address, port)
            if value not in values:
                seen = ", ".join(f'"{v}"' for v in values) or "no TXT records"
                return (
                    f"DNS record for {fqdn} not yet propagated: {address}:{port} has {seen}, "
                    f'expected "{value}"'
                )
    except (NameserverError, DnsAnswerError) as exc:
        return f"TXT {fqdn}: {exc}"
    except (OSError, dns.exception.DNSException) as exc:
        return f"TXT {fqdn}: {describe_dns_error(exc, 'finding its nameservers')}"
    return None
