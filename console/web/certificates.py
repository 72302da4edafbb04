"""Certificate list (search, filter, paging), detail (status, chain, timeline), force-renew,
revoke (with a confirmation page), new."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Prefetch, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from console.web.access import mirror_live_groups, permission_required, render_page, role_flags
from console.web.certificate_files import chain_of
from console.web.dashboard import ChallengeStep, challenge_step
from console.web.forms import CertificateFilterForm, EndpointForm, NewCertificateForm, RevokeForm
from console.web.mirrored_lists import Chained, SourceFilter, filter_choices, mirrored
from issuance.access.scope import sees_own_resources, visible
from issuance.acme import health
from issuance.models import (
    Certificate,
    CertificateRequest,
    Challenge,
    ClusterResource,
    Event,
    Issuer,
    MirroredKind,
    Order,
    Revocation,
    Secret,
)
from issuance.operations import actions
from issuance.pki.x509 import CertInfo, cert_info
from issuance.probing.deployment import (
    certificate_q,
    deployment,
    state_of,
    state_of_filter_value,
)
from issuance.specs.certificate import apply_certificate_ex
from issuance.specs.errors import SpecError

PAGE_SIZE = 50
CHAIN_REQUESTS = 10
TIMELINE_EVENTS = 100
# Columns a list row never shows: the encrypted next key is the only large one.
_LIST_DEFERRED = ("next_private_key_ciphertext", "search_text", "last_error")


# -- list -------------------------------------------------------------------------------


def _filtered(form: CertificateFilterForm) -> QuerySet[Certificate]:
    qs = Certificate.objects.select_related("issuer").defer(*_LIST_DEFERRED).order_by("name")
    if not form.is_valid():
        return qs
    data = form.cleaned_data
    if data["q"]:
        # search_text is stored lower-cased: a plain LIKE, no UPPER() on every row.
        qs = qs.filter(search_text__contains=data["q"].strip().lower())
    if data["state"]:
        qs = qs.filter(state=data["state"])
    if data["issuer"]:
        qs = qs.filter(issuer__name=data["issuer"])
    if data["backoff"]:
        qs = qs.filter(next_retry_time__gt=timezone.now())
    if data["deployed"]:
        qs = qs.filter(certificate_q(state_of_filter_value(data["deployed"]), timezone.now()))
    return qs


def _mirrored_filtered(
    form: CertificateFilterForm, request: HttpRequest
) -> QuerySet[ClusterResource]:
    """The same filters on mirrored Certificates, read off their derived columns."""
    qs = mirrored(MirroredKind.CERTIFICATE, request.user, SourceFilter.from_request(request))
    qs = qs.order_by("cluster__name", "namespace", "name", "id")
    if not form.is_valid():
        return qs
    data = form.cleaned_data
    now = timezone.now()
    if data["q"]:
        qs = qs.filter(name__icontains=data["q"].strip())
    state = data["state"]
    if state == "Ready":
        qs = qs.filter(ready="True")
    elif state == "Failed":
        qs = qs.filter(last_failure_time__isnull=False)
    elif state == "Expired":
        qs = qs.filter(not_after__lte=now)
    elif state == "Issuing":
        qs = qs.exclude(ready="True").filter(last_failure_time__isnull=True)
    elif state == "Pending":
        qs = qs.filter(ready__in=("", "Unknown"))
    if data["issuer"]:
        qs = qs.filter(issuer_name=data["issuer"])
    if data["backoff"]:
        qs = qs.filter(next_retry_at__gt=now)
    if data["deployed"]:
        # Endpoints belong to the console's own certificates: no mirrored one matches.
        qs = qs.none()
    return qs


def _list_context(request: HttpRequest) -> dict[str, Any]:
    form = CertificateFilterForm(request.GET)
    source = SourceFilter.from_request(request)
    own = _filtered(form) if source.shows_own(request.user) else None
    chained = Chained(own, _mirrored_filtered(form, request))
    page = Paginator(chained, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [
        (row, None, True)
        if isinstance(row, ClusterResource)
        else (row, health.outage_of_issuer(row.issuer_id), False)
        for row in page.object_list
    ]
    return {
        **role_flags(request),  # the partial's checkboxes are for operators only
        "form": form,
        "page": page,
        "certificates": page.object_list,
        "rows": rows,
        "has_mirrored": source.shows_mirrored(),
        # Bulk actions ("all matching") act on the console's own certificates only.
        "own_count": chained.own_count(),
    }


def _issuer_names(request: HttpRequest) -> list[str]:
    """The issuer filter's choices: own issuers (for users who see them) and the issuers
    the visible mirrored Certificates name."""
    names: set[str] = set()
    if sees_own_resources(request.user):
        names.update(Issuer.objects.order_by("name").values_list("name", flat=True)[:200])
    mirrored_names = (
        visible(ClusterResource.objects.filter(kind=MirroredKind.CERTIFICATE), request.user)
        .exclude(issuer_name="")
        .order_by("issuer_name")
        .values_list("issuer_name", flat=True)
        .distinct()[:200]
    )
    names.update(mirrored_names)
    return sorted(names)


@permission_required("certificate", "read", "mirrored-object")
def certificate_list(request: HttpRequest) -> HttpResponse:
    context = _list_context(request)
    context.update(filter_choices(request, MirroredKind.CERTIFICATE))
    context["issuer_names"] = _issuer_names(request)
    return render_page(
        request,
        "console/certificates/list.html",
        context,
        live_groups=mirror_live_groups(request, "dashboard"),
    )


@permission_required("certificate", "read", "mirrored-object")
def certificate_list_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "console/partials/certificate_table.html", _list_context(request))


# -- detail -----------------------------------------------------------------------------


@dataclass
class ChainLink:
    """One CertificateRequest with its Order (ACME only) and that order's Challenges."""

    request: CertificateRequest
    order: Order | None
    challenges: list[tuple[Challenge, ChallengeStep]] = field(default_factory=list)


def _chain(cert: Certificate) -> list[ChainLink]:
    requests = list(
        CertificateRequest.objects.filter(certificate=cert)
        .defer("certificate_pem", "ca_pem")
        .order_by("-revision", "-created_at", "-id")[:CHAIN_REQUESTS]
    )
    orders = {
        o.request_id: o
        for o in Order.objects.filter(request__in=requests)
        .defer("certificate_pem")
        .prefetch_related(
            Prefetch("challenges", queryset=Challenge.objects.order_by("dns_name", "type", "id"))
        )
    }
    links = []
    for cr in requests:
        order = orders.get(cr.pk)
        challenges = [(c, challenge_step(c)) for c in order.challenges.all()] if order else []
        links.append(ChainLink(cr, order, challenges))
    return links


def _stored_cert(cert: Certificate) -> tuple[Secret | None, CertInfo | None]:
    secret = Secret.objects.filter(name=cert.secret_name).defer("tls_key_ciphertext").first()
    if secret is None or not secret.tls_crt:
        return secret, None
    try:
        return secret, cert_info(secret.tls_crt)
    except ValueError:
        return secret, None


def _part_context(cert: Certificate, part: str) -> dict[str, Any]:
    if part == "status":
        secret, info = _stored_cert(cert)
        return {
            "cert": cert,
            "ready": cert.get_condition("Ready"),
            "issuing": cert.get_condition("Issuing"),
            "capped": cert.get_condition("DurationCapped"),
            "dns_preflight": cert.get_condition("DNSPreflight"),
            "secret": secret,
            "info": info,
            "outage": health.outage_of_issuer(cert.issuer_id),
            "revocations": list(
                Revocation.objects.filter(certificate=cert).order_by("-requested_at", "-id")[:3]
            ),
        }
    if part == "chain":
        return {"cert": cert, "chain": _chain(cert)}
    if part == "endpoints":
        rows = list(cert.endpoints.order_by("host", "port", "server_name"))
        now = timezone.now()
        return {
            "cert": cert,
            "endpoints": [(e, state_of(e, now)) for e in rows],
            "deployment": deployment(rows, now),
            "endpoint_form": EndpointForm(),
        }
    if part == "timeline":
        events = Event.objects.filter(certificate_name=cert.name).order_by("-created_at", "-id")
        return {"cert": cert, "events": list(events[:TIMELINE_EVENTS])}
    raise Http404(part)


PARTS = ("status", "endpoints", "chain", "timeline")


def _get_certificate(name: str) -> Certificate:
    return get_object_or_404(
        Certificate.objects.select_related("issuer").defer("next_private_key_ciphertext"),
        name=name,
    )


@permission_required("certificate", "read")
def certificate_detail(request: HttpRequest, name: str) -> HttpResponse:
    cert = _get_certificate(name)
    context: dict[str, Any] = {"cert": cert}
    for part in PARTS:
        context.update(_part_context(cert, part))
    secret = context.get("secret")
    # The Download card (console/web/certificate_files.py): once a certificate is stored.
    context["files"] = (
        {"chain": bool(chain_of(secret))} if secret is not None and secret.tls_crt else None
    )
    return render_page(
        request,
        "console/certificates/detail.html",
        context,
        live_groups=f"certificate:{cert.name}",
    )


@permission_required("certificate", "read")
def certificate_partial(request: HttpRequest, name: str, part: str) -> HttpResponse:
    cert = _get_certificate(name)
    context = {**role_flags(request), **_part_context(cert, part)}
    return render(request, f"console/partials/certificate_{part}.html", context)


# -- actions ----------------------------------------------------------------------------


@require_POST
@permission_required("certificate", "renew")
def force_renew(request: HttpRequest, name: str) -> HttpResponse:
    cert = _get_certificate(name)
    try:
        actions.force_renew(cert, actor=request.user.get_username())
    except actions.ActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Renewal of {cert.name} requested.")
    return redirect("web:certificate-detail", name=cert.name)


@permission_required("certificate", "revoke")
def revoke(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the confirmation step (what is revoked, where, what follows; the reason).
    POST (CSRF-checked): revoke through issuance.operations.actions, as the API and certctl do."""
    cert = _get_certificate(name)
    form = RevokeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            actions.revoke(cert, form.cleaned_data["reason"], actor=request.user.get_username())
        except actions.ActionError as exc:
            messages.error(request, str(exc))
        else:
            messages.success(
                request, f"Revocation of {cert.name} requested; a new key will be issued."
            )
        return redirect("web:certificate-detail", name=cert.name)
    secret, info = _stored_cert(cert)
    context = {"cert": cert, "form": form, "info": info, "secret": secret}
    return render_page(request, "console/certificates/revoke.html", context)


@permission_required("certificate", "create")
def certificate_new(request: HttpRequest) -> HttpResponse:
    form = NewCertificateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        name = form.cleaned_data["name"]
        if Certificate.objects.filter(name=name).exists():
            form.add_error("name", f"a certificate named {name!r} already exists")
        else:
            try:
                apply_certificate_ex(name, form.spec(), actor=request.user.get_username())
            except SpecError as exc:
                form.add_spec_errors(exc.errors)
            else:
                messages.success(request, f"Certificate {name} created.")
                return redirect("web:certificate-detail", name=name)
    return render_page(request, "console/certificates/new.html", {"form": form})
