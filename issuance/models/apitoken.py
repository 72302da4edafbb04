"""ApiToken: a user's named API token, stored as a digest (the token is shown once)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """`Authorization: Token <token>`; the row keeps SHA-256(token), never the token.

    A user has any number of tokens (one per script or machine), each revoked on its own.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    # The first characters of the token, to tell tokens apart in a list (not secret enough
    # to matter: 8 of 43+ characters).
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "created_at"], name="apitoken_user")]

    def __str__(self) -> str:
        return f"ApiToken/{self.prefix}… ({self.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None
