"""How ACME failures reach the worker: TemporaryError (try later) or AcmeProblemError (stop).

- badNonce: retried inside the client, never seen here.
- 429, `rateLimited`, or any Retry-After on an error: the whole CA is paused
  (AcmeServer.paused_until) and a TemporaryError with the remaining pause is raised.
- network errors (refused, reset, timed out): the CA is recorded as unreachable (health.py)
  and an AcmeUnreachableError says when the next probe is; while it lasts, calls wait for
  the probe instead of being sent (the same error, nothing sent).
- 5xx and other transport trouble: TemporaryError (the worker backs off 5 s → 30 min).
- other 4xx problem documents: AcmeProblemError, carrying the CA's type/detail/status.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from issuance.controllers.base import PermanentError, TemporaryError

PROBLEM_PREFIX = "urn:ietf:params:acme:error:"
RATE_LIMITED = PROBLEM_PREFIX + "rateLimited"
BAD_NONCE = PROBLEM_PREFIX + "badNonce"
ACCOUNT_DOES_NOT_EXIST = PROBLEM_PREFIX + "accountDoesNotExist"
ORDER_NOT_READY = PROBLEM_PREFIX + "orderNotReady"
ALREADY_REVOKED = PROBLEM_PREFIX + "alreadyRevoked"


def problem_type(code_or_type: str | None) -> str:
    """Full URN for a problem type: `rateLimited` → `urn:ietf:params:acme:error:rateLimited`."""
    value = str(code_or_type or "")
    if not value:
        return ""
    return value if ":" in value else PROBLEM_PREFIX + value


class AcmeProblemError(PermanentError):
    """The CA refused the request with an RFC 7807 problem document (4xx)."""

    def __init__(
        self,
        type_: str,
        detail: str,
        status: int | None = None,
        subproblems: list[dict[str, Any]] | None = None,
    ) -> None:
        self.type = problem_type(type_) or "about:blank"
        self.detail = detail
        self.status = status
        self.subproblems = subproblems or []
        super().__init__(self.describe())

    @property
    def short_type(self) -> str:
        return self.type.removeprefix(PROBLEM_PREFIX)

    def describe(self) -> str:
        status = f" (HTTP {self.status})" if self.status else ""
        return f"{self.type}: {self.detail}{status}"


class AcmeTemporaryError(TemporaryError):
    """The CA or the network failed in a way that retrying later may fix."""


class AcmePausedError(AcmeTemporaryError):
    """The CA asked us to wait (rate limit / Retry-After); no call was or will be made."""

    def __init__(self, directory_url: str, remaining: timedelta, reason: str) -> None:
        self.directory_url = directory_url
        self.reason = reason
        seconds = int(remaining.total_seconds())
        super().__init__(
            f"ACME server {directory_url} is paused for {seconds}s: {reason}", delay=remaining
        )


def problem_reason(type_: str, detail: str) -> str:
    """The Order/Challenge `reason` text: `<problem type>: <detail>` as cert-manager shows it."""
    return f"{problem_type(type_)}: {detail}" if type_ else detail


class AcmeUnreachableError(AcmeTemporaryError):
    """The CA did not answer (now or recently): wait for the probe, which wakes the waiters.

    `retry_at`: when the caller should look again at the latest (items are woken earlier,
    as soon as a probe gets an answer); `probe_at`: when the next probe may be sent.
    """

    REASON = "CAUnreachable"
    # False when the request that failed was certainly never sent (the connection was
    # refused or never made), so nothing was created at the CA (CA fallback relies on it).
    request_sent = True

    def __init__(
        self,
        directory_url: str,
        since: datetime,
        error: str,
        probe_at: datetime | None,
        retry_at: datetime,
        now: datetime,
    ) -> None:
        self.directory_url = directory_url
        self.since = since
        self.error = error
        self.probe_at = probe_at
        super().__init__(
            f"{self.REASON}: {error} since {since.strftime('%Y-%m-%d %H:%M:%S UTC')}",
            delay=max(retry_at - now, timedelta(seconds=1)),
        )

    def probe_wait(self, now: datetime) -> timedelta:
        """How long until a probe may be sent (at least a second)."""
        if self.probe_at is None:
            return timedelta(seconds=1)
        return max(self.probe_at - now, timedelta(seconds=1))
