"""DownloadToken: a bearer token that can read one certificate's current key pair (or those
of certificates whose name matches a glob), stored as a digest (the token is shown once)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class DownloadToken(models.Model):
    """`Authorization: Bearer <token>` on /download/<certificate>/<file>; the row keeps
    SHA-256(token), never the token (issuance/access/apitokens.py says why a fast digest).

    Scope: `certificate` (one certificate; deleted with it) or `name_pattern` (an fnmatch
    glob on certificate names, not a label selector), never both.
    """

    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16)
    digest = models.CharField(max_length=64, unique=True)
    certificate = models.ForeignKey(
        "issuance.Certificate",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="download_tokens",
    )
    name_pattern = models.CharField(max_length=253, blank=True, default="")
    # The PKCS#12/JKS password for this token's downloads, encrypted like a Secret's key.
    keystore_password_ciphertext = models.TextField(blank=True, default="")
    created_by = models.CharField(max_length=150, blank=True, default="")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"DownloadToken/{self.prefix}… ({self.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def scope(self) -> str:
        if self.certificate is not None:
            return f"certificate {self.certificate.name}"
        return f"certificates matching {self.name_pattern}"
