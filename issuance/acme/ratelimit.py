"""Per-CA pauses: a CA's 429 / rateLimited / Retry-After stops every issuer using it.

The pause lives in AcmeServer (one row per directory URL) so all workers on all hosts
honour it. Each process keeps what it saw for a second (servers.py), so checking before
every call costs no query in the common case and a pause recorded here is honoured at once.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

from django.db.models.functions import Greatest
from django.utils import timezone

from issuance.acme import servers
from issuance.acme.protocol.errors import AcmePausedError
from issuance.models import AcmeServer

# A rate limit without Retry-After: wait this long (Let's Encrypt always sends the header).
DEFAULT_PAUSE = timedelta(minutes=5)
# Never honour absurd Retry-After values for longer than this.
MAX_PAUSE = timedelta(hours=24)


def _read(directory_url: str) -> tuple[datetime | None, str]:
    state = servers.read(directory_url)
    return state.paused_until, state.pause_reason


def check_not_paused(directory_url: str) -> None:
    """Raise AcmePausedError (delay = the remaining pause) if the CA asked us to wait."""
    until, reason = _read(directory_url)
    if until is None:
        return
    remaining = until - timezone.now()
    if remaining > timedelta(0):
        raise AcmePausedError(directory_url, remaining, reason)


def paused_until(directory_url: str) -> datetime | None:
    until, _ = _read(directory_url)
    return until if until and until > timezone.now() else None


def record_pause(directory_url: str, delay: timedelta | None, reason: str) -> datetime:
    """Pause the CA for `delay` (never shortening a longer pause); returns the pause end."""
    delay = DEFAULT_PAUSE if delay is None or delay <= timedelta(0) else min(delay, MAX_PAUSE)
    now = timezone.now()
    until = now + delay
    server, created = AcmeServer.objects.get_or_create(
        directory_url=directory_url,
        defaults={"paused_until": until, "pause_reason": reason[:2000], "updated_at": now},
    )
    if not created:
        # Greatest() keeps a longer pause another worker recorded meanwhile.
        AcmeServer.objects.filter(pk=server.pk).update(
            paused_until=Greatest("paused_until", until)
            if server.paused_until and server.paused_until > now
            else until,
            pause_reason=reason[:2000],
            updated_at=now,
        )
        server.refresh_from_db(fields=["paused_until"])
        until = server.paused_until or until
    _remember(directory_url, until, reason)
    return until


def clear_pause(directory_url: str) -> None:
    AcmeServer.objects.filter(directory_url=directory_url).update(
        paused_until=None, pause_reason="", updated_at=timezone.now()
    )
    servers.forget(directory_url)


def _remember(directory_url: str, until: datetime | None, reason: str) -> None:
    known = servers.cached(directory_url) or servers.HEALTHY
    servers.remember(
        directory_url, dataclasses.replace(known, paused_until=until, pause_reason=reason)
    )


def forget_cache() -> None:
    servers.forget()
