"""CertificateRequest: one immutable CSR, approved by policy or a person, then signed."""

from __future__ import annotations

from typing import cast

from django.db import models

from issuance.models.base import ImmutableSpecMixin, Reconciled, Resource
from issuance.shapes import CertificateRequestSpec, PolicyEvaluation


class Approval(models.TextChoices):
    PENDING = "Pending", "Pending"
    APPROVED = "Approved", "Approved"
    DENIED = "Denied", "Denied"


class RequestState(models.TextChoices):
    """Reason of the Ready condition, as in cert-manager."""

    PENDING = "Pending", "Pending"
    ISSUED = "Issued", "Issued"
    FAILED = "Failed", "Failed"
    DENIED = "Denied", "Denied"


class CertificateRequest(ImmutableSpecMixin, Resource, Reconciled):
    """Spec: request (PEM CSR), issuerRef, duration, usages, isCA, requester.

    `certificate` + `revision` name the owner; external CSRs have neither. The pair is
    unique, so a revision can never get a second request, whatever crashes in between.
    """

    KIND = "CertificateRequest"
    IMMUTABLE_FIELDS = ("spec", "issuer", "certificate", "revision", "requester", "source")

    issuer = models.ForeignKey("issuance.Issuer", on_delete=models.PROTECT, related_name="requests")
    certificate = models.ForeignKey(
        "issuance.Certificate",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="requests",
    )
    revision = models.PositiveIntegerField(null=True, blank=True)
    requester = models.CharField(max_length=253, blank=True, default="")
    # Where it came from: certificate (our own controller), api, bootstrap, kubernetes.
    source = models.CharField(max_length=32, default="api")

    approval = models.CharField(max_length=16, choices=Approval.choices, default=Approval.PENDING)
    decided_by = models.CharField(max_length=150, blank=True, default="")
    decided_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(
        max_length=16, choices=RequestState.choices, default=RequestState.PENDING
    )
    certificate_pem = models.TextField(blank=True, default="")
    ca_pem = models.TextField(blank=True, default="")
    failure_time = models.DateTimeField(null=True, blank=True)
    # The approval policy's last evaluation (issuance.approval): outcome, reason, and each
    # check {name, passed, detail}, so the approval queue shows why a request waits.
    policy_checks = models.JSONField(default=dict, blank=True)

    class Meta(Reconciled.Meta):
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["certificate", "revision"],
                name="one_request_per_revision",
                condition=models.Q(certificate__isnull=False),
            )
        ]
        indexes = [
            *Reconciled.Meta.indexes,
            models.Index(
                fields=["created_at"],
                name="cr_pending_approval",
                condition=models.Q(approval="Pending"),
            ),
        ]

    @property
    def typed_spec(self) -> CertificateRequestSpec:
        """The `spec` column with its fields typed (the one cast)."""
        return cast(CertificateRequestSpec, self.spec)

    @property
    def typed_policy_checks(self) -> PolicyEvaluation | None:
        """The approval policy's last verdict; None before the policy looked."""
        return cast(PolicyEvaluation, self.policy_checks) if self.policy_checks else None

    @property
    def csr_pem(self) -> str:
        return str(self.typed_spec.get("request") or "")

    @property
    def is_final(self) -> bool:
        return self.state in {RequestState.ISSUED, RequestState.FAILED, RequestState.DENIED}
