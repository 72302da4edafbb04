"""What every challenge solver offers, and the small helpers they share.

A solver makes one challenge answerable (`present`), checks that the world sees the answer
the way the CA will (`self_check`), and removes it again (`cleanup`). present and cleanup
must be idempotent: a worker killed after the call but before the row was saved calls
them again.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import socket
from typing import Protocol

from issuance.controllers.base import PermanentError
from issuance.models import Challenge


class Solver(Protocol):
    name: str
    # True when presenting changes nothing outside the database (the `presented` flag is
    # the answer): the controller then cleans up in the same write that finishes the row.
    cleanup_in_database: bool

    def present(self, challenge: Challenge) -> None:
        """Make the answer visible. Raise TemporaryError when it could not be done now."""

    def cleanup(self, challenge: Challenge) -> None:
        """Remove what present added (and only that)."""

    def self_check(self, challenge: Challenge) -> str | None:
        """None when the answer is visible, else why not (shown on the challenge)."""


class SolverConfigError(PermanentError):
    """The copied solver configuration cannot work (it is immutable, so retrying won't help)."""


def base_domain(dns_name: str) -> str:
    """The identifier without a wildcard label: `*.example.test` → `example.test`."""
    name = dns_name.strip().rstrip(".").lower()
    return name.removeprefix("*.")


def txt_record_name(dns_name: str) -> str:
    """The absolute DNS-01 record name: `_acme-challenge.<name>.` (RFC 8555 §8.4)."""
    return f"_acme-challenge.{base_domain(dns_name)}."


def dns01_txt_value(key_authorization: str) -> str:
    """base64url(SHA-256(key authorization)), unpadded (RFC 8555 §8.4)."""
    digest = hashlib.sha256(key_authorization.encode()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def txt_value(challenge: Challenge) -> str:
    """The DNS-01 record value. As in cert-manager, a dns-01 challenge's spec.key already
    holds it (base64url(SHA-256(key authorization))), not the key authorization itself."""
    return challenge.key_authorization


def parse_hostport(value: str, default_port: int = 53) -> tuple[str, int]:
    """`host`, `host:port`, `[v6]:port` or a bare IPv6 address → (host, port)."""
    text = (value or "").strip()
    if not text:
        raise ValueError("empty address")
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest.removeprefix(":")
        return host, int(port) if port else default_port
    if text.count(":") > 1:  # bare IPv6
        return text, default_port
    host, _, port = text.partition(":")
    if not host:
        raise ValueError(f"no host in {value!r}")
    return host, int(port) if port else default_port


def resolve_ip(host: str) -> str:
    """An IP address for `host` (DNS libraries need addresses, configs may hold names)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_UDP)
        return str(infos[0][4][0])
    return host
