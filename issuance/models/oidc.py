"""Single sign-on records (issuance/access/oidc.py, issuance/access/oidc_mapping.py).

OidcIdentity links a console user to one account at an OpenID Provider, by the provider's
issuer and the account's `sub` (never by username: a username at the provider can be
renamed or reused, `sub` cannot). OidcGroupRule is one group → roles rule that an admin
edits on Users → Single sign-on; rules from OIDC_GROUP_ROLES are not stored.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class OidcIdentity(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identities"
    )
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="oidcidentity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class OidcGroupRule(models.Model):
    """Members of `group` get `roles` (comma-separated), limited to `scopes` when set
    ("prod/team-a staging": cluster or cluster/namespace, space-separated)."""

    position = models.PositiveIntegerField(default=0)
    group = models.CharField(max_length=500)
    roles = models.CharField(max_length=100)
    scopes = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["position", "pk"]

    def __str__(self) -> str:
        return f"{self.group}={self.roles}" + (f"@{self.scopes}" if self.scopes else "")
