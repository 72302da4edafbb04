"""AcmeServer: per-CA state shared by all issuers that talk to it (rate-limit pauses)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class AcmeServer(models.Model):
    directory_url = models.CharField(max_length=1024, unique=True)
    paused_until = models.DateTimeField(null=True, blank=True)
    pause_reason = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return self.directory_url

    def is_paused(self) -> bool:
        return bool(self.paused_until and self.paused_until > timezone.now())
