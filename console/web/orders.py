"""ACME orders, newest first, filterable by state."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.web.access import mirror_live_groups, permission_required, render_page
from console.web.mirrored_lists import (
    Chained,
    SourceFilter,
    filter_choices,
    mirrored,
    rows_with_flags,
)
from issuance.models import MirroredKind, Order, OrderState

PAGE_SIZE = 50


def _context(request: HttpRequest) -> dict[str, Any]:
    """Own orders, then the mirrored cert-manager Orders of the user's scope, as one list."""
    source = SourceFilter.from_request(request)
    orders = (
        Order.objects.select_related("issuer", "request", "request__certificate")
        .defer(
            "certificate_pem",
            "request__spec",
            "request__certificate_pem",
            "request__ca_pem",
            "request__certificate__next_private_key_ciphertext",
        )
        .order_by("-created_at", "-id")
    )
    mirrored_orders = mirrored(MirroredKind.ORDER, request.user, source).order_by(
        "-observed_at", "-id"
    )
    state = request.GET.get("state", "")
    if state and state in OrderState.values:
        orders = orders.filter(state=state)
        mirrored_orders = mirrored_orders.filter(state=state)
    own = orders if source.shows_own(request.user) else None
    chained = Chained(own, mirrored_orders)
    page = Paginator(chained, PAGE_SIZE).get_page(request.GET.get("page"))
    return {
        "page": page,
        "orders": rows_with_flags(request.user, page.object_list),
        "states": OrderState.choices,
        "state": state,
        "has_mirrored": source.shows_mirrored(),
    }


@permission_required("order", "read", "mirrored-object")
def order_list(request: HttpRequest) -> HttpResponse:
    context = {**_context(request), **filter_choices(request, MirroredKind.ORDER)}
    return render_page(
        request,
        "console/orders.html",
        context,
        live_groups=mirror_live_groups(request, "dashboard"),
    )


@permission_required("order", "read", "mirrored-object")
def order_list_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "console/partials/order_table.html", _context(request))
