"""Issuance webhooks: URLs told (a signed JSON POST) when a certificate gets a new revision.

`IssuanceWebhook` is configured by admins (API, console); its signing secret is stored
encrypted (`issuance/pki/encryption.py`, as Secret rows store keys) and shown only in the
answer that created it. `WebhookDelivery` is one notice to one webhook, a reconciled row:
queued in the same transaction as the revision it announces (so a crash neither loses nor
duplicates it: one row per webhook, certificate, revision and event, ever), and POSTed by
the worker (`controllers/webhookdeliveries.py`) with its own backoff, never inside the
certificate's reconcile.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, cast

from django.core.validators import URLValidator
from django.db import models
from django.utils import timezone

from issuance.models.base import Reconciled, validate_resource_name
from issuance.pki.encryption import decrypt_text, encrypt_text

URL_MAX = 2000
validate_webhook_url = URLValidator(schemes=["http", "https"])


class IssuanceWebhook(models.Model):
    KIND = "IssuanceWebhook"

    name = models.CharField(max_length=253, unique=True, validators=[validate_resource_name])
    url = models.CharField(max_length=URL_MAX, validators=[validate_webhook_url])
    secret_ciphertext = models.TextField()
    enabled = models.BooleanField(default=True)
    # Optional filters (shell globs, fnmatch, case-sensitive); empty matches everything.
    issuer_glob = models.CharField(max_length=253, blank=True, default="")
    certificate_glob = models.CharField(max_length=253, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"IssuanceWebhook/{self.name}"

    @property
    def secret(self) -> bytes:
        return decrypt_text(self.secret_ciphertext).encode()

    def set_secret(self, secret: str) -> None:
        self.secret_ciphertext = encrypt_text(secret)

    def matches(self, certificate: str, issuer: str) -> bool:
        return (not self.certificate_glob or fnmatchcase(certificate, self.certificate_glob)) and (
            not self.issuer_glob or fnmatchcase(issuer, self.issuer_glob)
        )


class WebhookDeliveryState(models.TextChoices):
    PENDING = "Pending", "Pending"
    DELIVERED = "Delivered", "Delivered"
    FAILED = "Failed", "Failed"


class DeliveryEvent(models.TextChoices):
    ISSUED = "issued", "issued"
    TEST = "test", "test"


class WebhookDelivery(Reconciled):
    KIND = "WebhookDelivery"

    webhook = models.ForeignKey(
        IssuanceWebhook, on_delete=models.CASCADE, related_name="deliveries"
    )
    event = models.CharField(max_length=16, choices=DeliveryEvent.choices)
    certificate_name = models.CharField(max_length=253, blank=True, default="")
    # The revision announced (null for a test notice).
    revision = models.PositiveIntegerField(null=True, blank=True)
    # The JSON body sent (public facts only, never a key), fixed when queued so every
    # attempt sends the same bytes; each attempt signs it with a fresh timestamp.
    payload = models.JSONField(default=dict)
    state = models.CharField(
        max_length=16, choices=WebhookDeliveryState.choices, default=WebhookDeliveryState.PENDING
    )
    # One entry per attempt: {"at", "status" (HTTP status or null), "error", "ms"}.
    attempts = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta(Reconciled.Meta):
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["webhook", "certificate_name", "revision", "event"],
                name="webhookdelivery_once",
            )
        ]

    def __str__(self) -> str:
        return f"WebhookDelivery/{self.name}"

    @property
    def name(self) -> str:
        what = f"{self.certificate_name}-{self.revision}" if self.revision else self.event
        return f"{self.webhook_id}-{what}"

    @property
    def typed_attempts(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.attempts or [])
