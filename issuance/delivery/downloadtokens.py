"""Scoped download tokens: created (shown once), stored as SHA-256, revoked, marked used.

A token reads the current key pair of one certificate, or of every certificate whose name
matches a glob (a name convention such as `web-*`; tokens do not select by a Certificate's
labels). Why a fast digest: see issuance/access/apitokens.py.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from django.db import transaction
from django.utils import timezone

from issuance.access.apitokens import NAME_MAX, PREFIX_LENGTH, TokenError, digest_of, new_token_text
from issuance.models import Certificate, DownloadToken
from issuance.observability import events
from issuance.pki.encryption import decrypt_text, encrypt_text

PATTERN_MAX = 253
PASSWORD_MAX = 128


def create_download_token(
    name: str,
    *,
    actor: str,
    certificate: Certificate | None = None,
    name_pattern: str = "",
    keystore_password: str = "",
) -> tuple[DownloadToken, str]:
    """The row and the token text, which is never available again."""
    name = name.strip()
    name_pattern = name_pattern.strip()
    if not name:
        raise TokenError("a token needs a name (what or who uses it)")
    if len(name) > NAME_MAX:
        raise TokenError(f"a token name is at most {NAME_MAX} characters")
    if (certificate is None) == (not name_pattern):
        raise TokenError("a token is scoped to one certificate or to a name pattern (one of them)")
    if len(name_pattern) > PATTERN_MAX:
        raise TokenError(f"a name pattern is at most {PATTERN_MAX} characters")
    if len(keystore_password) > PASSWORD_MAX:
        raise TokenError(f"a keystore password is at most {PASSWORD_MAX} characters")
    text = new_token_text()
    with transaction.atomic():
        token = DownloadToken.objects.create(
            name=name,
            prefix=text[:PREFIX_LENGTH],
            digest=digest_of(text),
            certificate=certificate,
            name_pattern=name_pattern,
            keystore_password_ciphertext=encrypt_text(keystore_password)
            if keystore_password
            else "",
            created_by=actor,
        )
        _record(token, "DownloadTokenCreated", "created", actor)
    return token, text


def revoke_download_token(token_id: int, *, actor: str) -> DownloadToken:
    with transaction.atomic():
        # of=self: PostgreSQL cannot lock the nullable side of the outer join.
        token = (
            DownloadToken.objects.select_for_update(of=("self",))
            .select_related("certificate")
            .filter(pk=token_id)
            .first()
        )
        if token is None:
            raise DownloadToken.DoesNotExist(token_id)
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            _record(token, "DownloadTokenRevoked", "revoked", actor)
    return token


def _record(token: DownloadToken, reason: str, verb: str, actor: str) -> None:
    message = f"Download token {token.name!r} ({token.prefix}…) for {token.scope} {verb}"
    if token.certificate is not None:
        name = token.certificate.name
        events.record("Certificate", name, reason, message, actor=actor, certificate_name=name)
    else:
        events.record("DownloadToken", token.name, reason, message, actor=actor)


def active_token(text: str) -> DownloadToken | None:
    """The unrevoked token with this text, or None (one indexed lookup)."""
    return (
        DownloadToken.objects.select_related("certificate")
        .filter(digest=digest_of(text), revoked_at__isnull=True)
        .first()
    )


def in_scope(token: DownloadToken, certificate_name: str) -> bool:
    if token.certificate is not None:
        return bool(token.certificate.name == certificate_name)
    return fnmatchcase(certificate_name, token.name_pattern)


def certificates_in_scope(token: DownloadToken) -> list[str]:
    if token.certificate is not None:
        return [token.certificate.name]
    names = Certificate.objects.values_list("name", flat=True)
    return [name for name in names if fnmatchcase(name, token.name_pattern)]


def keystore_password(token: DownloadToken) -> str:
    return (
        decrypt_text(token.keystore_password_ciphertext)
        if token.keystore_password_ciphertext
        else ""
    )
