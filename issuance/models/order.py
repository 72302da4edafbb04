"""Order: one ACME order for one approved CertificateRequest (immutable spec)."""

from __future__ import annotations

from typing import cast

from django.db import models

from issuance.models.base import ImmutableSpecMixin, Reconciled, Resource
from issuance.shapes import OrderAuthorization, OrderSpec, Restart


class OrderState(models.TextChoices):
    NONE = "", "(not created)"
    PENDING = "pending", "pending"
    READY = "ready", "ready"
    PROCESSING = "processing", "processing"
    VALID = "valid", "valid"
    INVALID = "invalid", "invalid"
    EXPIRED = "expired", "expired"
    ERRORED = "errored", "errored"


FINAL_ORDER_STATES = frozenset(
    {OrderState.VALID, OrderState.INVALID, OrderState.EXPIRED, OrderState.ERRORED}
)


class Order(ImmutableSpecMixin, Resource, Reconciled):
    """Spec: request, issuerRef, dnsNames, commonName, ipAddresses, duration, profile."""

    KIND = "Order"
    IMMUTABLE_FIELDS = ("spec", "request", "issuer")

    request = models.OneToOneField(
        "issuance.CertificateRequest", on_delete=models.CASCADE, related_name="order"
    )
    issuer = models.ForeignKey("issuance.Issuer", on_delete=models.PROTECT, related_name="orders")

    url = models.CharField(max_length=1024, blank=True, default="")
    finalize_url = models.CharField(max_length=1024, blank=True, default="")
    certificate_url = models.CharField(max_length=1024, blank=True, default="")
    state = models.CharField(max_length=16, choices=OrderState.choices, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    authorizations = models.JSONField(default=list, blank=True)
    certificate_pem = models.TextField(blank=True, default="")
    failure_time = models.DateTimeField(null=True, blank=True)
    # Set before the new-order call, so a crash right after it is noticed (see orders controller).
    create_attempted_at = models.DateTimeField(null=True, blank=True)
    # ACME orders given up because the CA failed them after an outage (order_retry.py).
    restarts = models.JSONField(default=list, blank=True)
    # Which of the issuer's ACME servers the current ACME order is made at (directory URL;
    # "" = the issuer's first server, for rows made before fallbacks) and its place in the
    # list (0 = spec.acme.server, 1 = fallback[0], ...). Stored with create_attempted_at,
    # before newOrder, so a crash never leads to a second order at another CA.
    server = models.CharField(max_length=1024, blank=True, default="")
    server_index = models.PositiveSmallIntegerField(default=0)
    # Servers that refused this order's newOrder (acme/fallback.py): {server,
    # index, reason, at}; not asked again for this Order.
    server_refusals = models.JSONField(default=list, blank=True)

    class Meta(Reconciled.Meta):
        ordering = ["-created_at", "-id"]

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_ORDER_STATES

    # The JSON columns with their fields typed (the casts, one per column).
    @property
    def typed_spec(self) -> OrderSpec:
        return cast(OrderSpec, self.spec)

    @property
    def typed_authorizations(self) -> list[OrderAuthorization]:
        return cast(list[OrderAuthorization], self.authorizations or [])

    @property
    def typed_restarts(self) -> list[Restart]:
        return cast(list[Restart], self.restarts or [])
