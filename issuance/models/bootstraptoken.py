"""BootstrapToken: lets an external client (a kubelet-like agent) submit CSRs and read its own.

Format as Kubernetes bootstrap tokens: `<6 char id>.<16 char secret>`, [a-z0-9]. Only a
SHA-256 of the secret is stored; the full token is shown once, at creation.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class BootstrapToken(models.Model):
    token_id = models.CharField(max_length=6, unique=True)
    secret_hash = models.CharField(max_length=64)
    description = models.TextField(blank=True, default="")
    # Extra groups reported to the approval policy (system:bootstrappers is always added).
    groups = models.JSONField(default=list, blank=True)
    # Issuers this token may submit to; empty: any issuer.
    issuer_names = models.JSONField(default=list, blank=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    created_by = models.CharField(max_length=150, blank=True, default="")
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_by = models.CharField(max_length=150, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"BootstrapToken/{self.token_id}"

    @property
    def username(self) -> str:
        return f"system:bootstrap:{self.token_id}"

    @property
    def all_groups(self) -> list[str]:
        return ["system:bootstrappers", *[g for g in self.groups if g != "system:bootstrappers"]]

    def is_usable(self, now: object = None) -> bool:
        moment = now or timezone.now()
        return self.revoked_at is None and self.expires_at > moment  # type: ignore[operator]
