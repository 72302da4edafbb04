"""Issuers: kind, readiness, ACME account, solvers, and how many certificates use each; for
an ACME issuer whose server does not answer, since when and the error."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.web.access import permission_required, render_page
from issuance.access import permissions
from issuance.acme import health
from issuance.acme.solvers import preflight_step
from issuance.models import Issuer, Secret
from issuance.specs.names import dns_name_problem


def solver_summary(issuer: Issuer) -> list[str]:
    """One line per ACME solver: its type and what it is selected for (no secrets)."""
    lines = []
    for solver in issuer.acme_spec.get("solvers") or []:
        if not isinstance(solver, dict):
            continue
        if "http01" in solver:
            kind = "HTTP-01"
        elif "dns01" in solver:
            dns01 = solver.get("dns01", {})
            keys = [k for k in dns01 if k != "cnameStrategy"]
            provider = keys[0] if keys else ""
            if provider == "lexicon":
                provider = f"lexicon: {dns01.get('lexicon', {}).get('provider', '?')}"
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
        ],
        # ACME issuers with a stored certificate: their chain can be downloaded
        # (console/web/certificate_files.py).
        "issuers_with_chain": set(
            Secret.objects.filter(certificate__issuer__kind="acme")
            .exclude(tls_crt="")
            .values_list("certificate__issuer__name", flat=True)
            .distinct()
        ),
        # Issuers offering "Test DNS" (ACME with a dns01 solver), with the last preflight.
        "dns_preflight": [
            (i.name, i.get_condition(preflight_step.CONDITION))
            for i in issuers
            if i.kind == "acme" and preflight_step.uses_dns01(i)
        ],
    }


def _can_admin(request: HttpRequest) -> dict[str, bool]:
    # Edit and delete controls (console/web/issuer_edit.py) are rendered for who may use them.
    return {"can_admin": permissions.may(request.user, "issuer", "change")}


@permission_required("issuer", "read")
def issuer_list(request: HttpRequest) -> HttpResponse:
    return render_page(request, "console/issuers.html", {**_context(), **_can_admin(request)})


@permission_required("issuer", "read")
def issuer_list_partial(request: HttpRequest) -> HttpResponse:
    context = {**_context(), **_can_admin(request)}
    return render(request, "console/partials/issuer_table.html", context)


@require_POST
@permission_required("issuer", "test-dns")
def test_dns(request: HttpRequest, name: str) -> HttpResponse:
    """ "Test DNS": the DNS-01 preflight for one example name, now; the outcome is shown
    as a message and kept on the issuer (condition DNSPreflight)."""
    issuer = get_object_or_404(Issuer, name=name)
    dns_name = str(request.POST.get("dns_name") or "").strip().lower().rstrip(".")
    problem = dns_name_problem(dns_name, allow_wildcard=True) if dns_name else "is required"
    if problem:
        messages.error(request, f"Test DNS for {issuer.name}: name {problem}")
    elif issuer.kind != "acme" or not preflight_step.uses_dns01(issuer):
        messages.error(request, f"Issuer {issuer.name} has no dns01 solver")
    else:
        result = preflight_step.test_name(issuer, dns_name)
        took = f"{result.seconds * 1000:.0f} ms"
        if result.ok:
            messages.success(request, f"Test DNS {dns_name}: passed in {took}: {result.message}")
        else:
            messages.error(request, f"Test DNS {dns_name}: failed in {took}: {result.message}")
    return redirect("web:issuers")
