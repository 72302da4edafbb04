"""Signed JSON bodies for outgoing webhooks (notifications, issuance notices).

A receiver checks that a POST came from this console and was not replayed:

    X-Issuance-Timestamp: <unix seconds>
    X-Issuance-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<raw body>" with the secret>

The timestamp is inside the signed text, so a captured request cannot be replayed later
with a new timestamp; receivers should refuse timestamps more than 5 minutes away from
their clock. Compare with `hmac.compare_digest` (`verify` here does).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Mapping

TIMESTAMP_HEADER = "X-Issuance-Timestamp"
SIGNATURE_HEADER = "X-Issuance-Signature"
MAX_SKEW_SECONDS = 300


def body_of(payload: Mapping[str, object]) -> bytes:
    """The exact bytes that are signed and sent (compact, keys sorted)."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


def signature(secret: bytes, body: bytes, timestamp: int) -> str:
    mac = hmac.new(secret, str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def signed_headers(secret: bytes, body: bytes, now: float | None = None) -> dict[str, str]:
    """The headers of a signed POST of `body`."""
    timestamp = int(time.time() if now is None else now)
    return {
        "Content-Type": "application/json",
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret, body, timestamp),
    }


def verify(
    secret: bytes, body: bytes, headers: Mapping[str, str], now: float | None = None
) -> bool:
    """What a receiver does: the signature matches and the timestamp is recent."""
    try:
        timestamp = int(headers[TIMESTAMP_HEADER])
    except (KeyError, ValueError):
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > MAX_SKEW_SECONDS:
        return False
    expected = signature(secret, body, timestamp)
    return hmac.compare_digest(expected, headers.get(SIGNATURE_HEADER, ""))
