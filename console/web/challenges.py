"""ACME challenges: the scheduler's queue, those being processed, and finished ones."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.web.access import render_page, viewer_required
from console.web.dashboard import challenge_step
from issuance.models import Challenge

PAGE_SIZE = 50
# The filter matches the scheduler's view of a challenge, so each uses an index.
STATUS_FILTERS = {
    "queued": {"finished": False, "processing": False},
    "processing": {"processing": True},
    "finished": {"finished": True},
}


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
    page = Paginator(challenges, PAGE_SIZE).get_page(request.GET.get("page"))
    return {
        "page": page,
        "challenges": [(c, challenge_step(c)) for c in page.object_list],
        "status": status,
        "statuses": list(STATUS_FILTERS),
    }


@viewer_required
def challenge_list(request: HttpRequest) -> HttpResponse:
    return render_page(request, "console/challenges.html", _context(request))


@viewer_required
def challenge_list_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "console/partials/challenge_table.html", _context(request))
