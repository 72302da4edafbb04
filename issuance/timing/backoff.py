"""Backoff formulas: failed issuance and per-item worker errors."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings

# Per-item error backoff for the worker (docs/architecture.md, "The controller contract").
ACME_ERROR_BACKOFF = (timedelta(seconds=5), timedelta(minutes=30))
LOCAL_ERROR_BACKOFF = (timedelta(seconds=1), timedelta(seconds=30))


def exponential(attempts: int, minimum: timedelta, maximum: timedelta) -> timedelta:
    """minimum × 2^(attempts−1), capped at maximum; attempts ≤ 1 gives the minimum.

    The exponent is capped before it is used, so a huge attempt count cannot overflow.
    """
    if attempts <= 1:
        return min(minimum, maximum)
    if minimum <= timedelta(0):
        return timedelta(0)
    ratio = maximum / minimum
    exponent = attempts - 1
    # 2**exponent ≥ ratio already means the cap; checking the exponent first avoids huge ints.
    if ratio <= 1 or exponent >= 64 or 2**exponent >= ratio:
        return maximum
    result: timedelta = minimum * (2**exponent)
    return min(result, maximum)


def issuance_backoff(attempts: int | None) -> timedelta:
    """Wait after `attempts` failed issuances. A failure with no count counts as one (1 h)."""
    return exponential(attempts or 1, settings.BACKOFF_MIN, settings.BACKOFF_MAX)


def next_retry_time(last_failure_time: datetime | None, attempts: int | None) -> datetime | None:
    if last_failure_time is None:
        return None
    return last_failure_time + issuance_backoff(attempts)


def error_backoff(error_count: int, *, acme: bool = False) -> timedelta:
    lo, hi = ACME_ERROR_BACKOFF if acme else LOCAL_ERROR_BACKOFF
    return exponential(error_count, lo, hi)
