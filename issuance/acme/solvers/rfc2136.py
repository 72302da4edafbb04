"""DNS-01 via RFC 2136 dynamic updates (BIND9, Knot, PowerDNS, …), signed with TSIG.

Config (cert-manager's `dns01.rfc2136`): nameserver ("host" or "host:port"), tsigKeyName,
tsigAlgorithm (HMACMD5 (default), HMACSHA1, HMACSHA256, HMACSHA512), and the secret via
tsigSecretSecretRef {name, key} (the API moves an inline `tsigSecret` into a Secret).

present adds our TXT value (TTL 60) next to any others; cleanup deletes that value only, so
two challenges for one name (a wildcard and its base) never remove each other's record.
Both are idempotent in DNS: adding an existing RR or deleting a missing one is a no-op.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

import dns.exception
import dns.message
import dns.name
import dns.nameserver
import dns.query
import dns.rcode
import dns.resolver
import dns.tsig
import dns.update

from issuance.acme.solvers.base import (
    SolverConfigError,
    parse_hostport,
    resolve_ip,
    txt_record_name,
    txt_value,
)
from issuance.acme.solvers.selfcheck import check_dns01
from issuance.controllers.base import TemporaryError
from issuance.models import Challenge
from issuance.shapes import Rfc2136Spec

TTL = 60
TIMEOUT = 10.0

# cert-manager's names (case-insensitive) → dnspython's algorithm names.
ALGORITHMS: dict[str, dns.name.Name] = {
    "HMACMD5": dns.tsig.HMAC_MD5,
    "HMACSHA1": dns.tsig.HMAC_SHA1,
    "HMACSHA224": dns.tsig.HMAC_SHA224,
    "HMACSHA256": dns.tsig.HMAC_SHA256,
    "HMACSHA384": dns.tsig.HMAC_SHA384,
    "HMACSHA512": dns.tsig.HMAC_SHA512,
}


@dataclass(frozen=True)
class Rfc2136Config:
    host: str
    port: int
    key: dns.tsig.Key | None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def _tsig_secret(config: Rfc2136Spec) -> str:
    ref = config.get("tsigSecretSecretRef")
    if isinstance(ref, dict) and ref.get("name"):
        from issuance.specs.secret_refs import SecretRefError, read_secret_value

        try:
            return read_secret_value(str(ref["name"]), ref.get("key"))
        except SecretRefError as exc:
            # A Secret can be created later, so this is worth retrying.
            raise TemporaryError(f"rfc2136 tsigSecretSecretRef: {exc}") from exc
    return str(config.get("tsigSecret") or "")


def load_config(config: Rfc2136Spec) -> Rfc2136Config:
    nameserver = str(config.get("nameserver") or "")
    try:
        host, port = parse_hostport(nameserver)
    except ValueError as exc:
        raise SolverConfigError(f"rfc2136.nameserver {nameserver!r}: {exc}") from exc
    key_name = str(config.get("tsigKeyName") or "")
    if not key_name:
        return Rfc2136Config(host=host, port=port, key=None)
    algorithm_name = str(config.get("tsigAlgorithm") or "HMACMD5").upper().replace("-", "")
    algorithm = ALGORITHMS.get(algorithm_name)
    if algorithm is None:
        raise SolverConfigError(
            f"rfc2136.tsigAlgorithm {config.get('tsigAlgorithm')!r}: use one of "
            + ", ".join(ALGORITHMS)
        )
    secret = _tsig_secret(config)
    try:
        base64.b64decode(secret, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SolverConfigError("rfc2136 TSIG secret is not valid base64") from exc
    return Rfc2136Config(
        host=host, port=port, key=dns.tsig.Key(key_name, secret, algorithm=algorithm)
    )


class Rfc2136Solver:
    name = "rfc2136"
    cleanup_in_database = False

    def __init__(self, config: Rfc2136Spec) -> None:
        self.config = config

    def _settings(self) -> Rfc2136Config:
        loaded = load_config(self.config)
        return Rfc2136Config(host=resolve_ip(loaded.host), port=loaded.port, key=loaded.key)

    def find_zone(self, fqdn: str, cfg: Rfc2136Config) -> dns.name.Name:
        """Ask the configured nameserver (the primary we update) which zone holds `fqdn`."""
        res = dns.resolver.Resolver(configure=False)
        res.nameservers = [dns.nameserver.Do53Nameserver(cfg.host, cfg.port)]
        res.lifetime = TIMEOUT
        res.cache = None
        return dns.resolver.zone_for_name(fqdn, resolver=res)

    def _update(self, challenge: Challenge, *, add: bool) -> None:
        fqdn = txt_record_name(challenge.dns_name)
        value = txt_value(challenge)
        action = "add" if add else "delete"
        cfg = self._settings()
        try:
            zone = self.find_zone(fqdn, cfg)
            update = dns.update.UpdateMessage(zone, keyring=cfg.key)
            if add:
                update.add(fqdn, TTL, "TXT", f'"{value}"')
            else:
                update.delete(fqdn, "TXT", f'"{value}"')
            response = dns.query.tcp(update, cfg.host, port=cfg.port, timeout=TIMEOUT)
        except (OSError, dns.exception.DNSException) as exc:
            raise TemporaryError(
                f"rfc2136: {action} TXT {fqdn} at {cfg.address} failed: {type(exc).__name__}: {exc}"
            ) from exc
        rcode = response.rcode()
        if rcode != dns.rcode.NOERROR:
            raise TemporaryError(
                f"rfc2136: {action} TXT {fqdn} in zone {zone} at {cfg.address} was refused: "
                f"{dns.rcode.to_text(rcode)}"
            )

    def present(self, challenge: Challenge) -> None:
        self._update(challenge, add=True)

    def cleanup(self, challenge: Challenge) -> None:
        self._update(challenge, add=False)

    def self_check(self, challenge: Challenge) -> str | None:
        return check_dns01(txt_record_name(challenge.dns_name), txt_value(challenge))
