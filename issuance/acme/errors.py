"""How ACME failures reach the worker: TemporaryError (try later) or AcmeProblemError (stop).

- badNonce: retried inside the client, never seen here.
- 429, `rateLimited`, or any Retry-After on an error: the whole CA is paused
  (AcmeServer.paused_until) and a TemporaryError with the remaining pause is raised.
- 5xx, network errors, timeouts: TemporaryError (the worker backs off 5 s → 30 min).
- other 4xx problem documents: AcmeProblemError, carrying the CA's type/detail/status.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from issuance.controllers.base import PermanentError, TemporaryError

PROBLEM_PREFIX = "urn:ietf:params:acme:error:"
RATE_LIMITED = PROBLEM_PREFIX + "rateLimited"
BAD_NONCE = PROBLEM_PREFIX + "badNonce"
ACCOUNT_DOES_NOT_EXIST = PROBLEM_PREFIX + "accountDoesNotExist"
ORDER_NOT_READY = PROBLEM_PREFIX + "orderNotReady"


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
