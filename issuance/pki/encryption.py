"""Encryption at rest for private keys (Fernet; keys from KEY_ENCRYPTION_KEY)."""

from __future__ import annotations

from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured


class DecryptionError(Exception):
    pass


def _parse_keys(keys: str) -> list[str]:
    """The comma-separated KEY_ENCRYPTION_KEY, newest first (older ones are being rotated out)."""
    parts = [k.strip() for k in keys.split(",") if k.strip()]
    if not parts:
        raise ImproperlyConfigured(
            "KEY_ENCRYPTION_KEY is not set: private keys cannot be stored. Generate one with "
            "`python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'`"
        )
    return parts


def configured_keys() -> list[bytes]:
    """Every key in KEY_ENCRYPTION_KEY, newest first, for other keyed uses (HMAC digests)."""
    return [k.encode() for k in _parse_keys(str(settings.KEY_ENCRYPTION_KEY))]


@lru_cache(maxsize=4)
def _fernet(keys: str) -> MultiFernet:
    parts = _parse_keys(keys)
    try:
        return MultiFernet([Fernet(p.encode()) for p in parts])
    except ValueError as exc:
        raise ImproperlyConfigured(f"KEY_ENCRYPTION_KEY is not a valid Fernet key: {exc}") from None


def encrypt_text(plaintext: str) -> str:
    return _fernet(settings.KEY_ENCRYPTION_KEY).encrypt(plaintext.encode()).decode()


def decrypt_text(ciphertext: str) -> str:
    try:
        return _fernet(settings.KEY_ENCRYPTION_KEY).decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        raise DecryptionError(
            "stored private key cannot be decrypted with KEY_ENCRYPTION_KEY (wrong or rotated key?)"
        ) from None
