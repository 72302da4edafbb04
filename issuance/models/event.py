"""Event: the persistent timeline of what happened to a resource, and who did it."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Event(models.Model):
    NORMAL = "Normal"
    WARNING = "Warning"

    kind = models.CharField(max_length=32)
    name = models.CharField(max_length=253)
    # The Certificate this belongs to (its requests, orders and challenges too): one timeline.
    certificate_name = models.CharField(max_length=253, blank=True, default="")
    type = models.CharField(max_length=16, default=NORMAL)
    reason = models.CharField(max_length=128)
    message = models.TextField(blank=True, default="")
    actor = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["kind", "name", "created_at"], name="event_object"),
            models.Index(fields=["certificate_name", "created_at"], name="event_certificate"),
            # The audit log's filters (console/web/audit.py), newest first within each.
            models.Index(fields=["actor", "created_at"], name="event_actor"),
            models.Index(fields=["reason", "created_at"], name="event_reason"),
        ]

    def __str__(self) -> str:
        return f"{self.kind}/{self.name} {self.reason}"
