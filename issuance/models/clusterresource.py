"""ClusterResource: one cert-manager object mirrored from a Cluster (never reconciled here).

One row per (cluster, uid); `body` is the object as the API server sent it (metadata without
managedFields, spec, status). The columns beside it are read off the body when it is stored
(issuance/kubernetes/certmanager/mirror.py), so lists, filters, the dashboard and metrics are plain indexed
queries. A deleted object's row is deleted: the mirror shows what the cluster has.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import QuerySet
from django.utils import timezone

from issuance.models.clusterevent import ClusterEvent


class MirroredKind(models.TextChoices):
    CERTIFICATE = "Certificate", "Certificate"
    CERTIFICATE_REQUEST = "CertificateRequest", "CertificateRequest"
    ISSUER = "Issuer", "Issuer"
    CLUSTER_ISSUER = "ClusterIssuer", "ClusterIssuer"
    ORDER = "Order", "Order"
    CHALLENGE = "Challenge", "Challenge"


class ClusterResource(models.Model):
    cluster = models.ForeignKey(
        "issuance.Cluster", on_delete=models.CASCADE, related_name="resources"
    )
    kind = models.CharField(max_length=32, choices=MirroredKind.choices)
    namespace = models.CharField(max_length=253, blank=True, default="")  # "" cluster-scoped
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64)
    resource_version = models.CharField(max_length=64, blank=True, default="")
    body = models.JSONField(default=dict)
    # Read off the body (issuance/kubernetes/certmanager/mirror.py `derived`):
    ready = models.CharField(max_length=16, blank=True, default="")  # True/False/Unknown/""
    reason = models.CharField(max_length=128, blank=True, default="")
    message = models.TextField(blank=True, default="")
    # Orders/Challenges: status.state; CertificateRequests: Approved/Denied/"" (pending).
    state = models.CharField(max_length=32, blank=True, default="")
    issuer_name = models.CharField(max_length=253, blank=True, default="")
    issuer_kind = models.CharField(max_length=32, blank=True, default="")
    # The owner in cert-manager's chain: Certificate <- CertificateRequest <- Order <- Challenge.
    owner_kind = models.CharField(max_length=32, blank=True, default="")
    owner_name = models.CharField(max_length=253, blank=True, default="")
    # The Certificate this object belongs to (itself for a Certificate): one timeline, one page.
    certificate_name = models.CharField(max_length=253, blank=True, default="")
    not_after = models.DateTimeField(null=True, blank=True)
    renewal_time = models.DateTimeField(null=True, blank=True)
    failed_attempts = models.PositiveIntegerField(default=0)
    last_failure_time = models.DateTimeField(null=True, blank=True)
    next_retry_at = models.DateTimeField(
        null=True, blank=True
    )  # computed (kubernetes/certmanager/retry.py)
    observed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["cluster_id", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="clusterresource_uid"),
        ]
        indexes = [
            models.Index(
                fields=["kind", "cluster", "namespace", "name"], name="clusterresource_lookup"
            ),
            models.Index(
                fields=["cluster", "namespace", "certificate_name"],
                name="clusterresource_certificate",
            ),
            models.Index(fields=["kind", "not_after"], name="clusterresource_expiry"),
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind}/{where}{self.name}@{self.cluster_id}"

    @property
    def spec(self) -> dict[str, Any]:
        spec = self.body.get("spec") if isinstance(self.body, dict) else None
        return spec if isinstance(spec, dict) else {}

    @property
    def status(self) -> dict[str, Any]:
        status = self.body.get("status") if isinstance(self.body, dict) else None
        return status if isinstance(status, dict) else {}

    def kube_events(self) -> QuerySet[ClusterEvent]:
        """Its Kubernetes Events, newest first: the object's timeline."""
        return ClusterEvent.objects.filter(
            cluster_id=self.cluster_id,
            namespace=self.namespace,
            involved_kind=self.kind,
            involved_name=self.name,
        ).order_by("-last_seen", "-id")

    @property
    def conditions(self) -> list[dict[str, Any]]:
        conds = self.status.get("conditions")
        return [c for c in conds if isinstance(c, dict)] if isinstance(conds, list) else []
