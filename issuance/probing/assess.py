"""What a served chain means for one Certificate: which of its revisions it is (or none),
whether the chain leads to the trusted CA, whether it names the host, when it expires.

Pure: the stored revisions and trust anchors are handed in (`known.py` reads them), so this
runs on a probe thread without touching the database.
"""

from __future__ import annotations

import hashlib
import ipaddress
from dataclasses import dataclass, field
from datetime import datetime

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.serialization import Encoding

from issuance.probing.handshake import ProbeFailure, Served
from issuance.shapes import EndpointProbe

# A chain longer than this is not followed (a loop or a hostile server).
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Known:
    """What the Certificate has been: leaf SHA-256 → revision, the current revision, and the
    certificates its chains may end at (the issuer's CA, or the system trust store)."""

    revisions: dict[str, int] = field(default_factory=dict)
    current: int | None = None
    anchors: list[x509.Certificate] = field(default_factory=list)
    anchors_are: str = "the issuer's CA"  # for the chain error: what was trusted


def fingerprint(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()


def _iso(value: datetime) -> str:
    return value.isoformat().replace("+00:00", "Z")


def failed(exc: ProbeFailure, now: datetime, duration_ms: int) -> EndpointProbe:
    return {
        "probedAt": _iso(now),
        "durationMs": duration_ms,
        "match": "error",
        "revision": None,
        "behind": None,
        "error": str(exc),
        "errorKind": exc.kind,
        "tlsVersion": "",
        "fingerprintSha256": "",
        "serial": "",
        "subject": "",
        "issuer": "",
        "notAfter": None,
        "expired": False,
        "chainVerified": False,
        "chainError": "",
        "hostnameMatch": False,
        "chain": [],
    }


def assess(
    served: Served, known: Known, name: str, now: datetime, duration_ms: int
) -> EndpointProbe:
    """The probe record of a chain that was read. `name` is the name clients ask for (the
    SNI name, else the host)."""
    if not served.chain_der:
        return failed(ProbeFailure("handshake", "the server sent no certificate"), now, duration_ms)
    chain = [x509.load_der_x509_certificate(der) for der in served.chain_der]
    leaf = chain[0]
    digest = fingerprint(served.chain_der[0])
    revision = known.revisions.get(digest)
    if revision is None:
        match, behind = "foreign", None
    elif revision == known.current:
        match, behind = "current", 0
    else:
        match, behind = "previous", (known.current or revision) - revision
    expired = leaf.not_valid_after_utc <= now
    chain_error = verify_chain(chain, known, now)
    return {
        "probedAt": _iso(now),
        "durationMs": duration_ms,
        "match": match,
        "revision": revision,
        "behind": behind,
        "error": "",
        "errorKind": "",
        "tlsVersion": served.tls_version,
        "fingerprintSha256": digest,
        "serial": format(leaf.serial_number, "x"),
        "subject": leaf.subject.rfc4514_string(),
        "issuer": leaf.issuer.rfc4514_string(),
        "notAfter": _iso(leaf.not_valid_after_utc),
        "expired": expired,
        "chainVerified": not chain_error,
        "chainError": chain_error,
        "hostnameMatch": names_host(leaf, name),
        "chain": [c.public_bytes(Encoding.PEM).decode() for c in chain],
    }


def verify_chain(chain: list[x509.Certificate], known: Known, now: datetime) -> str:
    """ "" when each certificate, from the leaf up, is valid now and signed by the next (from
    the served chain or the anchors) until one of the anchors; else why not, in words."""
    if not known.anchors:
        return f"no trust anchor to verify against ({known.anchors_are} is not known)"
    anchors = {a.public_bytes(Encoding.DER): a for a in known.anchors}
    pool = chain[1:] + known.anchors
    cert = chain[0]
    for _ in range(_MAX_DEPTH):
        if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
            when = _iso(cert.not_valid_after_utc)
            if now > cert.not_valid_after_utc:
                return f"{cert.subject.rfc4514_string()} expired at {when}"
            return f"{cert.subject.rfc4514_string()} is not valid yet"
        if cert.public_bytes(Encoding.DER) in anchors:
            return ""
        parent = _issuer_of(cert, pool)
        if parent is None:
            return f"the chain does not lead to {known.anchors_are}"
        if parent.public_bytes(Encoding.DER) in anchors:
            return ""
        cert = parent
    return "the chain is too long"


def _issuer_of(cert: x509.Certificate, pool: list[x509.Certificate]) -> x509.Certificate | None:
    for candidate in pool:
        if candidate.subject != cert.issuer or candidate is cert:
            continue
        try:
            cert.verify_directly_issued_by(candidate)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return candidate
    return None


def names_host(leaf: x509.Certificate, name: str) -> bool:
    """Whether the leaf's subjectAltName covers `name` (RFC 6125: one wildcard label,
    leftmost; IP addresses exactly). The common name is not looked at, as browsers do."""
    try:
        san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        address = None
    if address is not None:
        return address in san.get_values_for_type(x509.IPAddress)
    wanted = name.lower().rstrip(".")
    for dns in san.get_values_for_type(x509.DNSName):
        pattern = dns.lower().rstrip(".")
        if pattern == wanted:
            return True
        if pattern.startswith("*.") and "." in wanted:
            first, rest = wanted.split(".", 1)
            if first and rest == pattern[2:]:
                return True
    return False
