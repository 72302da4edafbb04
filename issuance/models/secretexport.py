"""SecretExport: which revision of a Certificate was written to a Kubernetes Secret."""

from __future__ import annotations

from django.db import models


class SecretExport(models.Model):
    certificate = models.OneToOneField(
        "issuance.Certificate", on_delete=models.CASCADE, related_name="secret_export"
    )
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    exported_revision = models.PositiveIntegerField(null=True, blank=True)
    exported_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["namespace", "name"]

    def __str__(self) -> str:
        return f"Secret/{self.namespace}/{self.name}"
