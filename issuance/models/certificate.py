"""Certificate: which names need a certificate, from which issuer, and how it is going."""

from __future__ import annotations

from datetime import datetime
from typing import cast

from django.db import models

from issuance.models.base import Reconciled, Resource
from issuance.pki.encryption import decrypt_text, encrypt_text
from issuance.shapes import CertificateSpec, PrivateKeySpec


class CertificateState(models.TextChoices):
    """A one-word summary for lists, filters and dashboard counts (derived from conditions)."""

    PENDING = "Pending", "Pending"
    ISSUING = "Issuing", "Issuing"
    READY = "Ready", "Ready"
    FAILED = "Failed", "Failed"
    EXPIRED = "Expired", "Expired"


class Certificate(Resource, Reconciled):
    KIND = "Certificate"

    issuer = models.ForeignKey(
        "issuance.Issuer", on_delete=models.PROTECT, related_name="certificates"
    )
    generation = models.PositiveIntegerField(default=1)
    observed_generation = models.PositiveIntegerField(default=0)
    secret_name = models.CharField(max_length=253)
    # Kubernetes labels (metadata.labels; issuance/specs/labels.py checks them): read by the
    # ACME solvers' selector.matchLabels. Not spec: a change is no new generation.
    labels = models.JSONField(default=dict, blank=True)
    # Lower-cased name, commonName and dnsNames, for search without JSON operators.
    search_text = models.TextField(blank=True, default="")

    state = models.CharField(
        max_length=16, choices=CertificateState.choices, default=CertificateState.PENDING
    )
    not_before = models.DateTimeField(null=True, blank=True)
    not_after = models.DateTimeField(null=True, blank=True)
    renewal_time = models.DateTimeField(null=True, blank=True)
    revision = models.PositiveIntegerField(null=True, blank=True)
    last_failure_time = models.DateTimeField(null=True, blank=True)
    failed_issuance_attempts = models.PositiveIntegerField(null=True, blank=True)
    next_retry_time = models.DateTimeField(null=True, blank=True)
    # Generation the last failure happened at: a spec change skips the backoff.
    last_failure_generation = models.PositiveIntegerField(null=True, blank=True)
    next_private_key_ciphertext = models.TextField(blank=True, default="")
    # When the next key was made: with rotationPolicy Never it is the current key.
    next_private_key_created_at = models.DateTimeField(null=True, blank=True)
    renew_requested_at = models.DateTimeField(null=True, blank=True)
    renew_requested_by = models.CharField(max_length=150, blank=True, default="")
    # ARI (RFC 9773), polled by the certificates controller (acme/ari.py): the
    # CA's suggested window for the current certificate, the instant chosen in it, when it
    # was last read and when it is read next. Cleared when a new revision is stored.
    ari_renewal_time = models.DateTimeField(null=True, blank=True)
    ari_window_start = models.DateTimeField(null=True, blank=True)
    ari_window_end = models.DateTimeField(null=True, blank=True)
    ari_checked_at = models.DateTimeField(null=True, blank=True)
    ari_next_check = models.DateTimeField(null=True, blank=True)

    class Meta(Reconciled.Meta):
        ordering = ["name"]
        indexes = [
            *Reconciled.Meta.indexes,
            models.Index(fields=["state", "name"], name="cert_state_name"),
            models.Index(
                fields=["next_retry_time"],
                name="cert_backoff",
                condition=models.Q(next_retry_time__isnull=False),
            ),
            models.Index(fields=["renewal_time"], name="cert_renewal"),
        ]

    # -- spec accessors -------------------------------------------------------
    @property
    def typed_spec(self) -> CertificateSpec:
        """The `spec` column as validate_certificate_spec stores it (the one cast)."""
        return cast(CertificateSpec, self.spec)

    @property
    def dns_names(self) -> list[str]:
        return list(self.typed_spec.get("dnsNames") or [])

    @property
    def ip_addresses(self) -> list[str]:
        return list(self.typed_spec.get("ipAddresses") or [])

    @property
    def common_name(self) -> str:
        return str(self.typed_spec.get("commonName") or "")

    @property
    def private_key_spec(self) -> PrivateKeySpec:
        return (self.typed_spec.get("privateKey") or {}).copy()

    @property
    def rotation_policy(self) -> str:
        return str(self.private_key_spec.get("rotationPolicy") or "Always")

    @property
    def revision_history_limit(self) -> int | None:
        value = self.typed_spec.get("revisionHistoryLimit")
        return int(value) if value is not None else None

    # -- next private key -------------------------------------------------------
    @property
    def next_private_key(self) -> str:
        if not self.next_private_key_ciphertext:
            return ""
        return decrypt_text(self.next_private_key_ciphertext)

    def set_next_private_key(self, pem: str, now: datetime) -> None:
        self.next_private_key_ciphertext = encrypt_text(pem) if pem else ""
        self.next_private_key_created_at = now if pem else None

    def refresh_search_text(self) -> None:
        parts = [self.name, self.common_name, *self.dns_names, *self.ip_addresses]
        self.search_text = " ".join(p.lower() for p in parts if p)
