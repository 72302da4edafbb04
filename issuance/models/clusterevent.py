"""ClusterEvent: a Kubernetes Event about a mirrored object (its timeline on our pages).

Only Events whose involvedObject is in a cert-manager API group are kept; one row per
(cluster, event uid), updated when the API server bumps `count`.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class ClusterEvent(models.Model):
    cluster = models.ForeignKey("issuance.Cluster", on_delete=models.CASCADE, related_name="events")
    uid = models.CharField(max_length=64)
    resource_version = models.CharField(max_length=64, blank=True, default="")
    namespace = models.CharField(max_length=253, blank=True, default="")
    involved_kind = models.CharField(max_length=32)
    involved_name = models.CharField(max_length=253)
    involved_uid = models.CharField(max_length=64, blank=True, default="")
    type = models.CharField(max_length=16, default="Normal")
    reason = models.CharField(max_length=128, blank=True, default="")
    message = models.TextField(blank=True, default="")
    source = models.CharField(max_length=253, blank=True, default="")  # component / controller
    count = models.PositiveIntegerField(default=1)
    first_seen = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-last_seen", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "uid"], name="clusterevent_uid"),
        ]
        indexes = [
            models.Index(
                fields=["cluster", "namespace", "involved_kind", "involved_name", "last_seen"],
                name="clusterevent_object",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.involved_kind}/{self.namespace}/{self.involved_name} {self.reason}"
