"""Issuer: who signs (ACME CA, a CA key pair, or the certificate's own key)."""

from __future__ import annotations

from typing import cast

from django.db import models

from issuance.models.base import Reconciled, Resource
from issuance.shapes import (
    AcmeIssuerSpec,
    CaIssuerSpec,
    IssuerKindSpec,
    IssuerSpec,
    SelfSignedIssuerSpec,
)


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
    def typed_spec(self) -> IssuerSpec:
        """The `spec` column as validate_issuer_spec stores it."""
        return cast(IssuerSpec, self.spec)

    @property
    def kind_spec(self) -> IssuerKindSpec:
        """A copy of the block of the issuer's kind (`spec.<kind>`), {} if there is none.
        acme_spec, ca_spec and self_signed_spec give it typed for their kind."""
        value = self.spec.get(self.kind) or {}
        return cast(IssuerKindSpec, dict(value) if isinstance(value, dict) else {})

    # The kind column says which block kind_spec is: the one narrowing cast each.
    @property
    def acme_spec(self) -> AcmeIssuerSpec:
        """`spec.acme` of an ACME issuer; {} for another kind."""
        return cast(AcmeIssuerSpec, self.kind_spec) if self.kind == IssuerKind.ACME else {}

    @property
    def ca_spec(self) -> CaIssuerSpec:
        """`spec.ca` of a CA issuer; {} for another kind."""
        return cast(CaIssuerSpec, self.kind_spec) if self.kind == IssuerKind.CA else {}

    @property
    def self_signed_spec(self) -> SelfSignedIssuerSpec:
        """`spec.selfSigned` of a self-signed issuer; {} for another kind."""
        if self.kind != IssuerKind.SELF_SIGNED:
            return {}
        return cast(SelfSignedIssuerSpec, self.kind_spec)

    @property
    def is_ready(self) -> bool:
        return self.condition_is("Ready")
