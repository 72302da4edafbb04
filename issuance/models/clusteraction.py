"""ClusterAction: a renew, approve or deny to write back to a cluster, as `cmctl` does.

Stored first (in the request that asked for it, with the audit Event), carried out by the
cluster sync on the worker: a crash or an unreachable API server loses nothing, and the
write itself is idempotent (a condition already there is not added twice; the Kubernetes
Event has a name derived from the action's id, so a retried create finds it).
"""

from __future__ import annotations

import uuid

from django.db import models
from django.utils import timezone


class ClusterActionKind(models.TextChoices):
    RENEW = "renew", "Renew"
    APPROVE = "approve", "Approve"
    DENY = "deny", "Deny"


class ClusterActionState(models.TextChoices):
    PENDING = "Pending", "Pending"
    DONE = "Done", "Done"  # written (or found already written)
    FAILED = "Failed", "Failed"  # permanent: object gone, forbidden, already decided otherwise


class ClusterAction(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    cluster = models.ForeignKey(
        "issuance.Cluster", on_delete=models.CASCADE, related_name="actions"
    )
    action = models.CharField(max_length=16, choices=ClusterActionKind.choices)
    kind = models.CharField(max_length=32)  # Certificate or CertificateRequest
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True, default="")  # the object we saw
    actor = models.CharField(max_length=150)
    reason = models.CharField(max_length=128, blank=True, default="")
    message = models.TextField(blank=True, default="")
    state = models.CharField(
        max_length=16, choices=ClusterActionState.choices, default=ClusterActionState.PENDING
    )
    attempts = models.PositiveIntegerField(default=0)
    conflicts = models.PositiveIntegerField(default=0)  # 409s met and retried
    last_error = models.TextField(blank=True, default="")
    next_attempt_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="clusteraction_due"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.kind}/{self.namespace}/{self.name}@{self.cluster_id}"
