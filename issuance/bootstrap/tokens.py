"""Creating, checking and revoking bootstrap tokens (`<6 char id>.<16 char secret>`)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from issuance.models import BootstrapToken
from issuance.observability import events

TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
DEFAULT_TTL = timedelta(hours=24)
MAX_TTL = timedelta(days=365)
# last_used_at is a hint for operators; writing it on every poll would be wasted writes.
LAST_USED_GRANULARITY = timedelta(minutes=1)


class TokenError(ValueError):
    pass


def _random(n: int) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(n))


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(
    *,
    actor: str,
    ttl: timedelta = DEFAULT_TTL,
    description: str = "",
    groups: list[str] | None = None,
    issuer_names: list[str] | None = None,
) -> tuple[BootstrapToken, str]:
    """Returns the token row and the full token, which is never shown again."""
    if ttl <= timedelta(0) or ttl > MAX_TTL:
        raise TokenError(f"ttl must be between 1s and {MAX_TTL.days} days")
    for group in groups or []:
        if not group or len(group) > 253:
            raise TokenError("groups must be non-empty strings of at most 253 characters")
    for _ in range(10):
        token_id, secret = _random(6), _random(16)
        try:
            with transaction.atomic():
                token = BootstrapToken.objects.create(
                    token_id=token_id,
                    secret_hash=hash_secret(secret),
                    description=description,
                    groups=list(groups or []),
                    issuer_names=list(issuer_names or []),
                    expires_at=timezone.now() + ttl,
                    created_by=actor,
                )
                events.record(
                    "BootstrapToken",
                    token_id,
                    "Created",
                    f"Bootstrap token {token_id} created, expires {token.expires_at.isoformat()}",
                    actor=actor,
                )
        except IntegrityError:
            continue  # id collision (1 in 2 billion); draw again
        return token, f"{token_id}.{secret}"
    raise TokenError("could not allocate a token id")


def authenticate(raw: str) -> BootstrapToken | None:
    """The usable token `raw` names, or None (unknown, wrong secret, expired or revoked)."""
    match = TOKEN_RE.match(raw.strip())
    if not match:
        return None
    token_id, secret = match.groups()
    token = BootstrapToken.objects.filter(token_id=token_id).first()
    # Compare even when the id is unknown, so timing does not reveal which ids exist.
    expected = token.secret_hash if token else hash_secret("x" * 16)
    if not hmac.compare_digest(expected, hash_secret(secret)) or token is None:
        return None
    now = timezone.now()
    if not token.is_usable(now):
        return None
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_GRANULARITY:
        BootstrapToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token


@transaction.atomic
def revoke(token_id: str, actor: str) -> BootstrapToken:
    token = BootstrapToken.objects.select_for_update().filter(token_id=token_id).first()
    if token is None:
        raise TokenError(f"no bootstrap token {token_id!r}")
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.revoked_by = actor
        token.save(update_fields=["revoked_at", "revoked_by"])
        events.record(
            "BootstrapToken",
            token_id,
            "Revoked",
            f"Bootstrap token {token_id} revoked",
            actor=actor,
        )
    return token
