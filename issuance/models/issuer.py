"""Issuer: who signs (ACME CA, a CA key pair, or the certificate's own key)."""

from __future__ import annotations

from typing import Any

from django.db import models

from issuance.models.base import Reconciled, Resource


class IssuerKind(models.TextChoices):
    ACME = "acme", "ACME"
    CA = "ca", "CA"
    SELF_SIGNED = "selfSigned", "Self-signed"


class Issuer(Resource, Reconciled):
    """Spec follows cert-manager's Issuer spec: exactly one of `acme`, `ca`, `selfSigned`.

    Extensions: `ca.maxDuration` / `selfSigned.maxDuration` (signing cap) and
    `approvalPolicy` (who is approved automatically).
    """

    KIND = "Issuer"

    kind = models.CharField(max_length=16, choices=IssuerKind.choices)
    # Kept so `apply` can round-trip ClusterIssuer manifests; both resolve the same way.
    cluster_scoped = models.BooleanField(default=False)
    generation = models.PositiveIntegerField(default=1)
    observed_generation = models.PositiveIntegerField(default=0)
    # ACME account (status); the key is encrypted with KEY_ENCRYPTION_KEY.
    acme_account_uri = models.CharField(max_length=1024, blank=True, default="")
    acme_account_key_ciphertext = models.TextField(blank=True, default="")
    # What the account was registered for (server + email + EAB key id), to re-register on change.
    acme_account_fingerprint = models.CharField(max_length=128, blank=True, default="")
    # Accounts at the fallback ACME servers (spec.acme.fallback), registered lazily with
    # the same account key: {directory URL: {"uri": ..., "fingerprint": ...}}.
    acme_fallback_accounts = models.JSONField(default=dict, blank=True)
    status_message = models.TextField(blank=True, default="")

    class Meta(Reconciled.Meta):
        ordering = ["name"]

    @property
    def kind_spec(self) -> dict[str, Any]:
        value = self.spec.get(self.kind) or {}
        return dict(value) if isinstance(value, dict) else {}

    @property
    def is_ready(self) -> bool:
        return self.condition_is("Ready")
