"""Challenge: one ACME challenge for one authorization of an Order (immutable spec)."""

from __future__ import annotations

from typing import cast

from django.db import models

from issuance.models.base import ImmutableSpecMixin, Reconciled, Resource
from issuance.shapes import ChallengeSpec


class ChallengeType(models.TextChoices):
    HTTP01 = "http-01", "HTTP-01"
    DNS01 = "dns-01", "DNS-01"


class ChallengeState(models.TextChoices):
    NONE = "", "(queued)"
    PENDING = "pending", "pending"
    PROCESSING = "processing", "processing"
    VALID = "valid", "valid"
    READY = "ready", "ready"
    INVALID = "invalid", "invalid"
    EXPIRED = "expired", "expired"
    ERRORED = "errored", "errored"


FINAL_CHALLENGE_STATES = frozenset(
    {ChallengeState.VALID, ChallengeState.INVALID, ChallengeState.EXPIRED, ChallengeState.ERRORED}
)


class Challenge(ImmutableSpecMixin, Resource, Reconciled):
    """Spec: authorizationURL, url, dnsName, wildcard, type, token, key, solver, issuerRef."""

    KIND = "Challenge"
    IMMUTABLE_FIELDS = ("spec", "order", "issuer", "dns_name", "type", "authorization_url")

    order = models.ForeignKey("issuance.Order", on_delete=models.CASCADE, related_name="challenges")
    issuer = models.ForeignKey(
        "issuance.Issuer", on_delete=models.PROTECT, related_name="challenges"
    )
    dns_name = models.CharField(max_length=253)
    type = models.CharField(max_length=16, choices=ChallengeType.choices)
    authorization_url = models.CharField(max_length=1024)
    token = models.CharField(max_length=256, db_index=True)

    # Final = valid/invalid/expired/errored and cleaned up; kept as a column for the indexes.
    finished = models.BooleanField(default=False)
    processing = models.BooleanField(default=False)
    scheduled_at = models.DateTimeField(null=True, blank=True)
    presented = models.BooleanField(default=False)
    presented_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=16, choices=ChallengeState.choices, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    next_check_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)

    class Meta(Reconciled.Meta):
        ordering = ["created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["order", "authorization_url"], name="one_challenge_per_authorization"
            )
        ]
        indexes = [
            *Reconciled.Meta.indexes,
            # Scheduler: the queue in age order, the queue per (name, type), the running set.
            models.Index(
                fields=["created_at", "id"],
                name="chal_queued_age",
                condition=models.Q(finished=False, processing=False),
            ),
            models.Index(
                fields=["dns_name", "type", "created_at", "id"],
                name="chal_queued_key",
                condition=models.Q(finished=False, processing=False),
            ),
            models.Index(
                fields=["dns_name", "type"],
                name="chal_processing_key",
                condition=models.Q(processing=True),
            ),
            # Fair share: which issuers have queued work, and each issuer's queue in age order.
            models.Index(
                fields=["issuer", "created_at", "id"],
                name="chal_queued_issuer",
                condition=models.Q(finished=False, processing=False),
            ),
        ]

    @property
    def typed_spec(self) -> ChallengeSpec:
        """The `spec` column as the orders controller made it (the one cast)."""
        return cast(ChallengeSpec, self.spec)

    @property
    def key_authorization(self) -> str:
        return str(self.typed_spec.get("key") or "")
