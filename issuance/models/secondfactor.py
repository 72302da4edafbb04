"""A local account's second factor, stored so that a copy of the database does not give it away.

- TOTPFactor: an authenticator app's secret, encrypted with KEY_ENCRYPTION_KEY (Fernet, like
  private keys). It is decrypted only to check a code and to show the QR code and the typed
  key while it is being set up.
- RecoveryCodeSet and RecoveryCode: the single-use recovery codes, kept as keyed digests
  (HMAC-SHA256). They are shown once when made and can never be read again.

Both are django-otp devices (django_otp.models.Device), so django_otp.verify_token(),
django_otp.login(), OTPMiddleware and OTPAdminSite work with them as with the plugins'
devices. django-otp's own per-device delays are left out on purpose: wrong codes count
toward the sign-in lock instead (django-axes, console/web/two_factor.py).

Rules (who must have a factor, enrolment, the audit log) are in issuance/access/two_factor.py.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from base64 import b32encode
from binascii import unhexlify
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings
from django.db import models
from django.utils import timezone
from django_otp.models import Device, TimestampMixin
from django_otp.oath import TOTP

from issuance.pki.encryption import configured_keys, decrypt_text, encrypt_text

# 20 random bytes, the size RFC 4226 recommends for HMAC-SHA1 (and django-otp's default).
KEY_BYTES = 20


def new_key_ciphertext() -> str:
    """A new random secret, hex encoded and encrypted (the default of a new TOTPFactor)."""
    return encrypt_text(secrets.token_hex(KEY_BYTES))


class TOTPFactor(TimestampMixin, Device):  # type: ignore[misc]  # django-otp: untyped
    """A time-based one-time-password authenticator (RFC 6238) with an encrypted secret."""

    key_ciphertext: models.TextField[str, str] = models.TextField(
        default=new_key_ciphertext, editable=False
    )
    step: models.PositiveSmallIntegerField[int, int] = models.PositiveSmallIntegerField(default=30)
    t0: models.BigIntegerField[int, int] = models.BigIntegerField(default=0)
    digits: models.PositiveSmallIntegerField[int, int] = models.PositiveSmallIntegerField(default=6)
    # Steps of clock difference allowed either way (one: the code before and after).
    tolerance: models.PositiveSmallIntegerField[int, int] = models.PositiveSmallIntegerField(
        default=1
    )
    drift: models.SmallIntegerField[int, int] = models.SmallIntegerField(default=0)
    # The step of the last code taken: a code is never taken twice, nor an older one.
    last_t: models.BigIntegerField[int, int] = models.BigIntegerField(default=-1)

    class Meta(Device.Meta):  # type: ignore[misc]  # django-otp has no type hints
        verbose_name = "TOTP factor"

    @property
    def bin_key(self) -> bytes:
        """The secret (decrypted here, only for a code's check or the set-up page)."""
        return unhexlify(decrypt_text(self.key_ciphertext).encode())

    def verify_token(self, token: Any) -> bool:
        """django-otp's TOTPDevice check, without its per-device delays (see the module)."""
        try:
            value = int(token)
        except (TypeError, ValueError):
            return False
        totp = TOTP(self.bin_key, self.step, self.t0, self.digits, self.drift)
        totp.time = time.time()
        if not totp.verify(value, self.tolerance, self.last_t + 1):
            return False
        self.last_t = totp.t()
        self.drift = totp.drift
        self.set_last_used_timestamp(commit=False)
        self.save(update_fields=["last_t", "drift", "last_used_at"])
        return True

    @property
    def config_url(self) -> str:
        """The otpauth:// URL an authenticator app scans (Key Uri Format, as django-otp's)."""
        issuer = str(getattr(settings, "OTP_TOTP_ISSUER", "") or "").replace(":", "")
        label = str(self.user.get_username())
        params = urlencode(
            {
                "secret": b32encode(self.bin_key),
                "algorithm": "SHA1",
                "digits": self.digits,
                "period": self.step,
            }
        )
        if issuer:
            label = f"{issuer}:{label}"
            params += f"&issuer={quote(issuer)}"
        return f"otpauth://totp/{quote(label)}?{params}"


def _digest_keys() -> list[bytes]:
    # Every KEY_ENCRYPTION_KEY given: codes made under a key that is being rotated out still
    # work (the first key makes new digests, as it encrypts new secrets).
    return configured_keys()


def recovery_code_digest(code: str, key: bytes | None = None) -> str:
    """The stored form of a recovery code: HMAC-SHA256 keyed with KEY_ENCRYPTION_KEY.

    Codes are random (50 bits), so a fast digest is enough against a leaked table when it is
    keyed: without the key, a copy of the rows gives no way to test guesses offline."""
    secret = key if key is not None else _digest_keys()[0]
    return hmac.new(secret, b"recovery-code:" + code.encode(), hashlib.sha256).hexdigest()


class RecoveryCodeSet(Device):  # type: ignore[misc]  # django-otp: untyped
    """A user's recovery codes as one django-otp device; each code is taken once."""

    last_used_at: models.DateTimeField[Any, Any] = models.DateTimeField(null=True, blank=True)

    class Meta(Device.Meta):  # type: ignore[misc]  # django-otp has no type hints
        verbose_name = "recovery code set"

    def add_codes(self, codes: list[str]) -> None:
        RecoveryCode.objects.bulk_create(
            RecoveryCode(device=self, digest=recovery_code_digest(code)) for code in codes
        )

    def verify_token(self, token: Any) -> bool:
        """Takes the code if it is one of the set's (and removes it). django_otp.verify_token()
        calls this with the device's row locked, so two requests cannot both take a code."""
        if not isinstance(token, str) or not token:
            return False
        candidates = [recovery_code_digest(token, key) for key in _digest_keys()]
        for stored in RecoveryCode.objects.filter(device=self).only("pk", "digest"):
            # Each stored digest is compared in constant time with every candidate.
            if any(hmac.compare_digest(stored.digest, c) for c in candidates):
                stored.delete()
                self.last_used_at = timezone.now()
                self.save(update_fields=["last_used_at"])
                return True
        return False


class RecoveryCode(models.Model):
    device = models.ForeignKey(RecoveryCodeSet, on_delete=models.CASCADE, related_name="codes")
    digest = models.CharField(max_length=64)

    def __str__(self) -> str:
        return "recovery code"
