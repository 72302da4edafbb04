"""Solvers stored as cert-manager documents them that cannot run here (docs/dns-providers.md;
http01 ingress/gatewayHTTPRoute settings: docs/cert-manager-differences.md).

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
HTTP01_SELF_SERVED = (
    "this console answers HTTP-01 itself (at /.well-known/acme-challenge/ or with "
    "`manage.py http01_solver`): use `http01: {}`"
)
# What cert-manager creates in the cluster for each http01 settings block.
HTTP01_ROUTED_THROUGH = {"ingress": "an Ingress", "gatewayHTTPRoute": "a Gateway API HTTPRoute"}


def unusable_solver(solvers: Iterable[Any], path: str = "spec.acme.solvers") -> str | None:
    """`<field>: <why>` for the first solver that cannot run here, or None."""
    for index, solver in enumerate(solvers):
        dns01 = solver.get("dns01") if isinstance(solver, dict) else None
        if isinstance(dns01, dict):
            problem = unusable_dns01(dns01, f"{path}[{index}].dns01")
            if problem:
                return problem
        http01 = solver.get("http01") if isinstance(solver, dict) else None
        if isinstance(http01, dict):
            problem = unusable_http01(http01, f"{path}[{index}].http01")
            if problem:
                return problem
    return None


def unusable_http01(http01: dict[str, Any], where: str = "http01") -> str | None:
    """`<field>: <why>` when this http01 block has cert-manager's cluster settings, or None.

    Empty blocks are dropped by the validator; a non-empty one asks for Pods and an Ingress
    or HTTPRoute that only exist in a cluster.
    """
    for key, routed in HTTP01_ROUTED_THROUGH.items():
        if http01.get(key):
            return (
                f"{where}.{key}: cert-manager routes HTTP-01 through {routed} in a Kubernetes "
                f"cluster; {HTTP01_SELF_SERVED}"
            )
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
