"""Per-user API tokens: created (shown once), stored as a digest, revoked, marked used.

Why SHA-256 and not a slow password hash (PBKDF2, bcrypt, argon2): a slow hash protects
guessable secrets that people choose. These tokens are 256 random bits from `secrets`; no
dictionary or brute force gets near them, so a fast digest protects them just as well if
the table leaks. It also lets the lookup be one indexed equality on the digest (a slow hash
needs a salt per row, hence a lookup by a separate id and a per-request cost of ~100 ms).
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from issuance.models import ApiToken, DownloadToken
from issuance.observability import events

# last_used_at is a hint for people; writing it on every request would be one write per
# API call. It is written when it is older than this.
LAST_USED_GRANULARITY = timedelta(minutes=1)
PREFIX_LENGTH = 8
NAME_MAX = 100


class TokenError(ValueError):
    pass


def digest_of(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token_text() -> str:
    """43 URL-safe characters: 256 random bits."""
    return secrets.token_urlsafe(32)


def create_token(
    user: User, name: str, *, actor: str, text: str | None = None
) -> tuple[ApiToken, str]:
    """The row and the token, which is never available again (only its digest is stored).

    `text` is a token chosen by the caller (test stacks that start a server with a known
    token); it must be as long as a generated one.
    """
    name = name.strip()
    if not name:
        raise TokenError("a token needs a name (what or who uses it)")
    if len(name) > NAME_MAX:
        raise TokenError(f"a token name is at most {NAME_MAX} characters")
    if text is None:
        text = new_token_text()
    elif len(text) < 32:
        raise TokenError("a chosen token must be at least 32 characters")
    with transaction.atomic():
        token = ApiToken.objects.create(
            user=user, name=name, prefix=text[:PREFIX_LENGTH], digest=digest_of(text)
        )
        events.record(
            "User",
            user.get_username(),
            "ApiTokenCreated",
            f"API token {name!r} ({token.prefix}…) created",
            actor=actor,
        )
    return token, text


def revoke_token(user: User, token_id: int, *, actor: str) -> ApiToken:
    """Revoke one of `user`'s tokens; another user's token is not found (no hint it exists)."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().filter(pk=token_id, user_id=user.pk).first()
        if token is None:
            raise ApiToken.DoesNotExist(token_id)
        if token.revoked_at is None:
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])
            events.record(
                "User",
                user.get_username(),
                "ApiTokenRevoked",
                f"API token {token.name!r} ({token.prefix}…) revoked",
                actor=actor,
            )
    return token


def mark_used(token: ApiToken | DownloadToken) -> None:
    """Record a use of a token (an API or a download token), at most once per
    LAST_USED_GRANULARITY (one UPDATE, no read)."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < LAST_USED_GRANULARITY:
        return
    # Conditional, so concurrent requests with the same token do not each write.
    type(token)._default_manager.filter(pk=token.pk).exclude(
        last_used_at__gt=now - LAST_USED_GRANULARITY
    ).update(last_used_at=now)
    token.last_used_at = now
