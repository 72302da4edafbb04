"""Revocation: a certificate someone revoked, at its CA (ACME) or in our own CRL (CA issuer).

One row per (issuer, serial), ever: asking twice is a conflict, and a worker repeating the
CA call after a crash finds the same row. ACME revocations are made by the worker
(`controllers/revocations.py`): the row is `Pending` until the CA said yes (or that it was
already revoked); a CA issuer's revocation is `Revoked` at once, and the CRL served at
`/crl/<issuer>.crl` lists it.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from issuance.models.base import Reconciled

# RFC 5280 §5.3.1 CRLReason names and codes a subscriber may give (the CA-side reasons
# cACompromise, aACompromise, certificateHold and removeFromCRL are not offered).
REASON_CODES: dict[str, int] = {
    "unspecified": 0,
    "keyCompromise": 1,
    "affiliationChanged": 3,
    "superseded": 4,
    "cessationOfOperation": 5,
    "privilegeWithdrawn": 9,
}
REASONS = tuple(REASON_CODES)


class RevocationState(models.TextChoices):
    PENDING = "Pending", "Pending"
    REVOKED = "Revoked", "Revoked"
    FAILED = "Failed", "Failed"


class Revocation(Reconciled):
    KIND = "Revocation"

    issuer = models.ForeignKey(
        "issuance.Issuer", on_delete=models.CASCADE, related_name="revocations"
    )
    certificate = models.ForeignKey(
        "issuance.Certificate",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="revocations",
    )
    # Kept when the Certificate is deleted: the timeline and the CRL still name it.
    certificate_name = models.CharField(max_length=253, blank=True, default="")
    # Lower-case hex without leading zeros (as Pebble's management API and CertInfo write it).
    serial = models.CharField(max_length=64)
    reason = models.CharField(max_length=32, choices=[(r, r) for r in REASONS])
    not_after = models.DateTimeField(null=True, blank=True)
    # The leaf (ACME revokeCert sends it); for keyCompromise, the certificate's own key
    # (the Secret's ciphertext, encrypted at rest) to sign the request, cleared once done.
    certificate_pem = models.TextField(blank=True, default="")
    key_ciphertext = models.TextField(blank=True, default="")
    state = models.CharField(
        max_length=16, choices=RevocationState.choices, default=RevocationState.PENDING
    )
    message = models.TextField(blank=True, default="")
    requested_by = models.CharField(max_length=150, blank=True, default="")
    requested_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta(Reconciled.Meta):
        ordering = ["-requested_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["issuer", "serial"], name="revocation_issuer_serial")
        ]

    def __str__(self) -> str:
        return f"Revocation/{self.name}"

    @property
    def name(self) -> str:
        return f"{self.certificate_name or 'certificate'}-{self.serial}"

    @property
    def reason_code(self) -> int:
        return REASON_CODES.get(self.reason, 0)
