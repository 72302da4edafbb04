"""Issuers: kind, readiness, ACME account, solvers, and how many certificates use each; for
an ACME issuer whose server does not answer, since when and the error."""

from __future__ import annotations

from typing import Any

from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.web.access import render_page, viewer_required
from issuance.controllers.acme import health
from issuance.models import Issuer


def solver_summary(issuer: Issuer) -> list[str]:
    """One line per ACME solver: its type and what it is selected for (no secrets)."""
    lines = []
    for solver in issuer.acme_spec.get("solvers") or []:
        if not isinstance(solver, dict):
            continue
        if "http01" in solver:
            kind = "HTTP-01"
        elif "dns01" in solver:
            dns01 = solver.get("dns01") or {}
            provider = next(iter(dns01), "") if isinstance(dns01, dict) else ""
            kind = f"DNS-01 ({provider})" if provider else "DNS-01"
        else:
            kind = "unknown"
        selector = solver.get("selector") or {}
        selected = (("dnsNames", selector.get("dnsNames")), ("dnsZones", selector.get("dnsZones")))
        parts = [f"{key} {', '.join(str(v) for v in values)}" for key, values in selected if values]
        lines.append(f"{kind}: {'; '.join(parts) if parts else 'default'}")
    return lines


def _context() -> dict[str, Any]:
    issuers = list(
        Issuer.objects.order_by("name")
        .defer("acme_account_key_ciphertext")
        .annotate(certificate_count=Count("certificates"))
    )
    return {
        "issuers": [
            (i, i.get_condition("Ready"), solver_summary(i), health.outage_of_issuer(i.pk))
            for i in issuers
        ]
    }


@viewer_required
def issuer_list(request: HttpRequest) -> HttpResponse:
    return render_page(request, "console/issuers.html", _context())


@viewer_required
def issuer_list_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "console/partials/issuer_table.html", _context())
