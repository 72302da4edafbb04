"""PasswordChangeRequired: a user who must choose their own password at their next sign-in.

Set when an admin creates the user or resets their password (the admin saw the generated
one); removed when the user changes it (issuance/access/passwords.py). A row's presence is
the flag, so Django's User model stays as it is.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class PasswordChangeRequired(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="password_change_required",
    )
    set_at = models.DateTimeField(auto_now_add=True)
    set_by = models.CharField(max_length=150, blank=True, default="")

    def __str__(self) -> str:
        return f"password change required (set by {self.set_by or '?'})"
