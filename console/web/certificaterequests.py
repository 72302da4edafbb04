"""Approval queue: pending CertificateRequests with their decoded CSR; approve or deny."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.web.access import mirror_live_groups, permission_required, render_page, role_flags
from console.web.forms import DecisionForm
from console.web.mirrored_lists import (
    Chained,
    SourceFilter,
    filter_choices,
    mirrored,
    mirrored_request,
)
from issuance.models import Approval, CertificateRequest, ClusterResource, MirroredKind
from issuance.operations import actions
from issuance.pki.csr import CSRError, CSRInfo, parse_csr

PAGE_SIZE = 25


@dataclass(frozen=True)
class PendingRequest:
    request: CertificateRequest
    csr: CSRInfo | None
    csr_error: str


def _decode(cr: CertificateRequest) -> PendingRequest:
    try:
        return PendingRequest(cr, parse_csr(cr.csr_pem), "")
    except CSRError as exc:
        # An unreadable CSR is still shown (and can be denied), with why it is unreadable.
        return PendingRequest(cr, None, str(exc))


def _queue_context(request: HttpRequest) -> dict[str, Any]:
    """Own pending requests first, then the mirrored pending CertificateRequests (neither
    Approved nor Denied) of the user's scope, paged as one list."""
    source = SourceFilter.from_request(request)
    pending = None
    if source.shows_own(request.user):
        pending = (
            CertificateRequest.objects.filter(approval=Approval.PENDING)
            .select_related("issuer", "certificate")
            .defer("certificate_pem", "ca_pem", "certificate__next_private_key_ciphertext")
            .order_by("created_at", "id")
        )
    mirrored_pending = (
        mirrored(MirroredKind.CERTIFICATE_REQUEST, request.user, source)
        .filter(state="")
        .order_by("observed_at", "id")
    )
    page = Paginator(Chained(pending, mirrored_pending), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    return {
        **role_flags(request),
        "page": page,
        "pending": [
            mirrored_request(request.user, row)
            if isinstance(row, ClusterResource)
            else _decode(row)
            for row in page.object_list
        ],
    }


@permission_required("certificate-request", "read", "mirrored-object")
def approval_queue(request: HttpRequest) -> HttpResponse:
    context = _queue_context(request)
    context.update(filter_choices(request, MirroredKind.CERTIFICATE_REQUEST))
    return render_page(
        request,
        "console/requests.html",
        context,
        live_groups=mirror_live_groups(request, "dashboard"),
    )


@permission_required("certificate-request", "read", "mirrored-object")
def approval_queue_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "console/partials/request_queue.html", _queue_context(request))


def _decide(request: HttpRequest, name: str, approve: bool) -> HttpResponse:
    cr = get_object_or_404(CertificateRequest, name=name)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{cr.name}: {field}: {' '.join(str(e) for e in errors)}")
        return redirect("web:requests")
    actor = request.user.get_username()
    reason = form.cleaned_data["reason"]
    message = form.cleaned_data["message"]
    try:
        if approve:
            actions.approve(cr, actor=actor, reason=reason or "Approved", message=message)
        else:
            actions.deny(cr, actor=actor, reason=reason or "Denied", message=message)
    except actions.ActionError as exc:
        messages.error(request, str(exc))
    else:
        verb = "approved" if approve else "denied"
        messages.success(request, f"CertificateRequest {cr.name} {verb}.")
    return redirect("web:requests")


@require_POST
@permission_required("certificate-request", "approve")
def approve(request: HttpRequest, name: str) -> HttpResponse:
    return _decide(request, name, approve=True)


@require_POST
@permission_required("certificate-request", "deny")
def deny(request: HttpRequest, name: str) -> HttpResponse:
    return _decide(request, name, approve=False)
