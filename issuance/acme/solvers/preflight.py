"""DNS-01 preflight: can this solver answer a DNS-01 challenge for this name, before an ACME
order is spent on it?

For `_acme-challenge.<name>`:
1. its CNAME chain is followed (acme-dns style delegation): the last name is the one that
   will hold the TXT record. A CNAME without `cnameStrategy: Follow` fails (a TXT record
   cannot sit next to a CNAME);
2. the zone holding that name is found by an SOA walk (the self-check resolver), or at the
   configured nameserver for rfc2136, or is the block's `zone`/`hostedZoneName`;
3. the provider answers with the given credentials: a read call (lexicon: authenticate,
   which reads the zone, then list the TXT records at the name). rfc2136 and webhook have
   no read call: the SOA at the configured nameserver (rfc2136) is their check.

Plain values in and out (the caller records the result); blocking network calls, each with
its timeout (DNS 10 s, provider HTTP 10 s connect / 30 s read).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dns.exception

from issuance.acme.solvers import usability
from issuance.acme.solvers.base import parse_hostport, resolve_ip, txt_record_name
from issuance.acme.solvers.lexicon_dns import find_zone, follow_cname, solver_for_dns01
from issuance.acme.solvers.rfc2136 import Rfc2136Config, Rfc2136Solver, load_config
from issuance.acme.solvers.selfcheck import describe_dns_error
from issuance.controllers.base import PermanentError, TemporaryError
from issuance.shapes import Rfc2136Spec


@dataclass(frozen=True)
class PreflightResult:
    ok: bool
    dns_name: str
    message: str
    record: str = ""  # where the TXT record will go (after CNAMEs)
    zone: str = ""
    provider: str = ""
    seconds: float = 0.0


def _provider_name(dns01: dict[str, Any]) -> str:
    return next((k for k in dns01 if k != "cnameStrategy"), "")


def _rfc2136_zone(config: Rfc2136Spec, fqdn: str) -> str:
    loaded = load_config(config)
    host, port = parse_hostport(f"{loaded.host}:{loaded.port}")
    cfg = Rfc2136Config(host=resolve_ip(host), port=port, key=loaded.key)
    try:
        zone = Rfc2136Solver(config).find_zone(fqdn, cfg)
    except (OSError, dns.exception.DNSException) as exc:
        raise TemporaryError(
            f"finding the zone of {fqdn} at {cfg.address}: "
            f"{describe_dns_error(exc, f'nameserver {cfg.address}')}"
        ) from exc
    return zone.to_text(omit_final_dot=True)


def run(solver: Mapping[str, Any], dns_name: str) -> PreflightResult:
    """Preflight one name (without `*.`) against one solver config (`{dns01: {...}}`)."""
    started = time.monotonic()
    dns01 = dict(solver.get("dns01") or {})
    provider = _provider_name(dns01)
    name = dns_name.removeprefix("*.").rstrip(".").lower()
    record, zone = txt_record_name(name), ""

    def result(ok: bool, message: str) -> PreflightResult:
        return PreflightResult(
            ok, name, message, record, zone, provider, time.monotonic() - started
        )

    unusable = usability.unusable_dns01(dns01)
    if unusable:
        return result(False, unusable)  # stored as cert-manager writes it; cannot run here
    try:
        chain = follow_cname(record)
        if len(chain) > 1:
            if dns01.get("cnameStrategy") != "Follow":
                return result(
                    False,
                    f"{record} is a CNAME to {chain[-1]}: set cnameStrategy: Follow to "
                    "write the record there",
                )
            record = chain[-1]
        lexicon = solver_for_dns01(dns01)
        if lexicon is not None:
            zone = lexicon.plan.zone or find_zone(record)
            found = lexicon.list_txt(record, zone)
            answered = f"{lexicon.plan.provider} answered ({len(found)} TXT at the name)"
        elif "rfc2136" in dns01:
            zone = _rfc2136_zone(dns01["rfc2136"], record)
            answered = f"nameserver {dns01['rfc2136'].get('nameserver')} serves it"
        else:
            zone = find_zone(record)
            answered = "the webhook is not called by the preflight"
    except (TemporaryError, PermanentError) as exc:
        return result(False, str(exc))
    except (OSError, dns.exception.DNSException) as exc:
        return result(False, f"{record}: {describe_dns_error(exc, 'the resolver')}")
    via = f" (via CNAME from {txt_record_name(name)})" if len(chain) > 1 else ""
    return result(True, f"{record}{via} in zone {zone}; {answered}")
