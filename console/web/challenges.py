"""ACME challenges: the scheduler's queue, those being processed, and finished ones."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.web.access import mirror_live_groups, permission_required, render_page
from console.web.dashboard import challenge_step
from console.web.mirrored_lists import Chained, SourceFilter, filter_choices, mirrored
from issuance.models import Challenge, ClusterResource, MirroredKind

PAGE_SIZE = 50
# The filter matches the scheduler's view of a challenge, so each uses an index.
STATUS_FILTERS = {
    "queued": {"finished": False, "processing": False},
    "processing": {"processing": True},
    "finished": {"finished": True},
}
# cert-manager's Challenge status.state values that end a challenge.
MIRRORED_FINAL_STATES = ("valid", "invalid", "errored", "expired")


def _context(request: HttpRequest) -> dict[str, Any]:
    challenges = Challenge.objects.select_related(
        "issuer", "order", "order__request", "order__request__certificate"
    ).defer(
        "spec",
        "order__spec",
        "order__certificate_pem",
        "order__authorizations",
        "order__request__spec",
        "order__request__certificate_pem",
        "order__request__ca_pem",
        "order__request__certificate__next_private_key_ciphertext",
    )
    status = request.GET.get("status", "")
    if status in STATUS_FILTERS:
        challenges = challenges.filter(**STATUS_FILTERS[status])
    if status == "finished":
        challenges = challenges.order_by("-created_at", "-id")
    else:
        challenges = challenges.order_by("created_at", "id")
    source = SourceFilter.from_request(request)
    own = challenges if source.shows_own(request.user) else None
    page = Paginator(Chained(own, _mirrored(request, source, status)), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    return {
        "page": page,
        "challenges": [
            (row, None) if isinstance(row, ClusterResource) else (row, challenge_step(row))
            for row in page.object_list
        ],
        "status": status,
        "statuses": list(STATUS_FILTERS),
        "has_mirrored": source.shows_mirrored(),
    }


def _mirrored(request: HttpRequest, source: SourceFilter, status: str) -> Any:
    """Mirrored Challenges with the same status filter, read off status.state (cert-manager
    has no queue: a challenge without a state is waiting, one with a final state is done)."""
    qs = mirrored(MirroredKind.CHALLENGE, request.user, source)
    if status == "finished":
        return qs.filter(state__in=MIRRORED_FINAL_STATES).order_by("-observed_at", "-id")
    if status == "processing":
        qs = qs.exclude(state__in=MIRRORED_FINAL_STATES).exclude(state="")
    elif status == "queued":
        qs = qs.filter(state="")
    return qs.order_by("observed_at", "id")


@permission_required("challenge", "read", "mirrored-object")
def challenge_list(request: HttpRequest) -> HttpResponse:
    context = {**_context(request), **filter_choices(request, MirroredKind.CHALLENGE)}
    return render_page(
        request,
        "console/challenges.html",
        context,
        live_groups=mirror_live_groups(request, "dashboard"),
    )


@permission_required("challenge", "read", "mirrored-object")
def challenge_list_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "console/partials/challenge_table.html", _context(request))
