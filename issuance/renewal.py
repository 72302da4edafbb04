"""When to renew: the renewal time of a certificate."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from issuance.durations import parse_duration

# At most this share of the renew-before window is taken off as anti-storm jitter.
JITTER_FRACTION = 0.02
JITTER_MAX = timedelta(hours=1)


def renew_before(
    not_before: datetime,
    not_after: datetime,
    renew_before_spec: str | None = None,
    renew_before_percentage: int | None = None,
) -> timedelta:
    """`renewBefore` if set and below the lifetime; else the percentage; else a third."""
    lifetime = not_after - not_before
    if renew_before_spec:
        value = parse_duration(renew_before_spec)
        if timedelta(0) < value < lifetime:
            return value
    if renew_before_percentage is not None and 0 < renew_before_percentage < 100:
        return lifetime * renew_before_percentage / 100
    return lifetime / 3


def jitter(name: str, window: timedelta) -> timedelta:
    """Deterministic per-certificate jitter in [0, min(2 % of window, 1 h)); never negative."""
    span = min(window * JITTER_FRACTION, JITTER_MAX)
    if span <= timedelta(0):
        return timedelta(0)
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big")
    return timedelta(seconds=span.total_seconds() * (digest / 2**64))


def renewal_time(
    name: str,
    not_before: datetime,
    not_after: datetime,
    renew_before_spec: str | None = None,
    renew_before_percentage: int | None = None,
    ari_suggested: datetime | None = None,
) -> datetime:
    """notAfter − renewBefore − jitter; an ARI window from the CA wins over the formula."""
    if ari_suggested is not None:
        return ari_suggested
    before = renew_before(not_before, not_after, renew_before_spec, renew_before_percentage)
    return not_after - before - jitter(name, before)
