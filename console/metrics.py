"""/metrics: Prometheus text format, for a scraper holding the token or on an allowed network."""

from __future__ import annotations

import hmac
import ipaddress
import logging
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from issuance.observability.metrics import REGISTRY

log = logging.getLogger("console.metrics")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(spec: tuple[str, ...]) -> tuple[Network, ...]:
    networks = []
    for item in spec:
        try:
            networks.append(ipaddress.ip_network(item.strip(), strict=False))
        except ValueError:
            log.error("METRICS_ALLOWED_NETWORKS: %r is not a network; ignored", item)
    return tuple(networks)


def _address_allowed(remote: str) -> bool:
    try:
        address = ipaddress.ip_address(remote)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    networks = _networks(tuple(settings.METRICS_ALLOWED_NETWORKS))
    return any(address in net for net in networks if net.version == address.version)


def _token_ok(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if not token or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header.removeprefix("Bearer ").strip().encode(), token.encode())


def allowed(request: HttpRequest) -> bool:
    """A matching bearer token, or a client address in METRICS_ALLOWED_NETWORKS.

    The address is the direct peer (REMOTE_ADDR); X-Forwarded-For is not trusted, so behind
    a proxy use the token.
    """
    return _token_ok(request) or _address_allowed(request.META.get("REMOTE_ADDR", ""))


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    if not allowed(request):
        return HttpResponse(
            "metrics: send Authorization: Bearer <METRICS_TOKEN> or scrape from "
            "METRICS_ALLOWED_NETWORKS\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
