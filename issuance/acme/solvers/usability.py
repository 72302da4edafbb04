"""Solvers stored as cert-manager documents them that cannot run here (docs/dns-providers.md).

They are kept, not refused, so a manifest applies as written; the ACME Issuer is Ready=False
with reason SolverNotUsable and a message naming the field and why, until it is changed (or,
for a webhook, until ACME_WEBHOOK_SOLVERS maps it to a URL).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from issuance.acme.solvers.webhook import missing_url
from issuance.specs.dns_providers import AMBIENT_IDENTITY, unusable

REASON = "SolverNotUsable"


def unusable_solver(solvers: Iterable[Any], path: str = "spec.acme.solvers") -> str | None:
    """`<field>: <why>` for the first solver that cannot run here, or None."""
    for index, solver in enumerate(solvers):
        dns01 = solver.get("dns01") if isinstance(solver, dict) else None
        if isinstance(dns01, dict):
            problem = unusable_dns01(dns01, f"{path}[{index}].dns01")
            if problem:
                return problem
    return None


def unusable_dns01(dns01: dict[str, Any], where: str = "dns01") -> str | None:
    """`<field>: <why>` when this dns01 block cannot run here, or None."""
    webhook = dns01.get("webhook")
    if isinstance(webhook, dict):
        problem = missing_url(webhook)  # type: ignore[arg-type]
        if problem:
            return f"{where}.webhook: {problem}"
    for key in AMBIENT_IDENTITY:
        found = unusable(key, dns01.get(key))
        if found:
            return f"{where}.{key}.{found[0]}: {found[1]}"
    return None
