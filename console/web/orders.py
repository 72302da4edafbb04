"""ACME orders, newest first, filterable by state."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from console.web.access import render_page, viewer_required
from issuance.models import Order, OrderState

PAGE_SIZE = 50


def _context(request: HttpRequest) -> dict[str, Any]:
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
    state = request.GET.get("state", "")
    if state and state in OrderState.values:
        orders = orders.filter(state=state)
    page = Paginator(orders, PAGE_SIZE).get_page(request.GET.get("page"))
    return {"page": page, "orders": page.object_list, "states": OrderState.choices, "state": state}


@viewer_required
def order_list(request: HttpRequest) -> HttpResponse:
    return render_page(request, "console/orders.html", _context(request))


@viewer_required
def order_list_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "console/partials/order_table.html", _context(request))
