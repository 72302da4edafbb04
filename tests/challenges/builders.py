"""Rows for challenge and scheduler tests: ACME issuer → request → order → challenges.

Built directly (the orders controller normally creates challenges) so each rule can be
checked in isolation.
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from issuance.models import CertificateRequest, Challenge, Issuer, Order
from tests.factories import make_certificate

_seq = itertools.count(1)


def make_acme_issuer(name: str = "acme", server: str = "https://ca.invalid/dir") -> Issuer:
    return Issuer.objects.create(
        name=name, kind="acme", spec={"acme": {"server": server, "solvers": [{"http01": {}}]}}
    )


def make_order(issuer: Issuer, name: str | None = None, with_certificate: bool = True) -> Order:
    name = name or f"order-{next(_seq)}"
    certificate = make_certificate(name, issuer) if with_certificate else None
    request = CertificateRequest.objects.create(
        name=name,
        issuer=issuer,
        certificate=certificate,
        revision=1 if certificate else None,
        spec={"request": ""},
    )
    return Order.objects.create(name=name, request=request, issuer=issuer, spec={})


def make_challenge(
    order: Order,
    dns_name: str,
    type_: str = "http-01",
    *,
    created_at: datetime | None = None,
    token: str | None = None,
    solver: dict[str, Any] | None = None,
    key: str | None = None,
    **fields: Any,
) -> Challenge:
    n = next(_seq)
    token = token or f"tok{n}"
    spec = {
        "authorizationURL": f"https://ca.invalid/authz/{n}",
        "url": f"https://ca.invalid/chall/{n}",
        "dnsName": dns_name,
        "wildcard": False,
        "type": type_,
        "token": token,
        "key": key or f"{token}.thumbprint",
        "solver": solver or ({"http01": {}} if type_ == "http-01" else {}),
        "issuerRef": {"name": order.issuer.name, "kind": "Issuer"},
    }
    return Challenge.objects.create(
        name=f"chal-{n}",
        order=order,
        issuer=order.issuer,
        dns_name=dns_name,
        type=type_,
        authorization_url=spec["authorizationURL"],
        token=token,
        spec=spec,
        created_at=created_at or timezone.now(),
        **fields,
    )


def queue(order: Order, names: list[str], start: datetime | None = None) -> list[Challenge]:
    """Queued http-01 challenges for `names`, one second apart (oldest first)."""
    start = start or timezone.now() - timedelta(hours=1)
    return [
        make_challenge(order, name, created_at=start + timedelta(seconds=i))
        for i, name in enumerate(names)
    ]
