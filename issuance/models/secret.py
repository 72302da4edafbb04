"""Secret: a stored key pair, like a Kubernetes `kubernetes.io/tls` Secret."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils import timezone

from issuance.fastpaths.model_save import insert_instead
from issuance.pki.encryption import decrypt_text, encrypt_text


class Secret(models.Model):
    name = models.CharField(max_length=253, unique=True)
    type = models.CharField(max_length=64, default="kubernetes.io/tls")
    tls_crt = models.TextField(blank=True, default="")
    ca_crt = models.TextField(blank=True, default="")
    tls_key_ciphertext = models.TextField(blank=True, default="")
    certificate = models.ForeignKey(
        "issuance.Certificate",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="secrets",
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"Secret/{self.name}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A new Secret (every first issuance writes one): one precompiled INSERT.
        if insert_instead(self, args, kwargs):
            return
        super().save(*args, **kwargs)

    @property
    def tls_key(self) -> str:
        return decrypt_text(self.tls_key_ciphertext) if self.tls_key_ciphertext else ""

    @tls_key.setter
    def tls_key(self, pem: str) -> None:
        """Store a private key generated here or one that passed `validate_private_key` when
        it came in: keys read back from here are loaded without OpenSSL's RSA check
        (`issuance.pki.keys.load_stored_private_key`)."""
        self.tls_key_ciphertext = encrypt_text(pem) if pem else ""
