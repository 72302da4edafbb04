"""When cert-manager will next try a Certificate whose last issuance failed.

cert-manager (pkg/controller/certificates/trigger) waits after a failed issuance:
    delay = min(max_backoff, min_backoff * 2 ** (failedIssuanceAttempts - 1))
from `status.lastFailureTime`; with its default flags min 1 h and max 32 h, so 1 h, 2 h,
4 h … 32 h. The operator sets a cluster's min/max when they changed those flags.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from issuance.models.cluster import DEFAULT_MAX_BACKOFF_SECONDS, DEFAULT_MIN_BACKOFF_SECONDS


def backoff(
    attempts: int | None,
    min_seconds: int = DEFAULT_MIN_BACKOFF_SECONDS,
    max_seconds: int = DEFAULT_MAX_BACKOFF_SECONDS,
) -> timedelta:
    """The pause after `attempts` failed issuances in a row.

    As cert-manager: no `failedIssuanceAttempts` at all means the minimum; 0 (which
    cert-manager never writes beside a lastFailureTime) gives 2 ** -1, half the minimum.
    """
    if attempts is None:
        return timedelta(seconds=min(max_seconds, min_seconds))
    # 2 ** 40 already exceeds any maximum a duration flag can hold; no huge integers.
    factor = 2.0 ** (min(max(attempts, 0), 41) - 1)
    return timedelta(seconds=min(float(max_seconds), min_seconds * factor))


def next_retry(
    last_failure: datetime | None,
    attempts: int | None,
    min_seconds: int = DEFAULT_MIN_BACKOFF_SECONDS,
    max_seconds: int = DEFAULT_MAX_BACKOFF_SECONDS,
) -> datetime | None:
    """`nextRetryTime` as cert-manager computes it; None when the last issuance did not fail."""
    if last_failure is None:
        return None
    return last_failure + backoff(attempts, min_seconds, max_seconds)
