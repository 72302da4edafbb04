"""One request to a CA and what its outcome means, told to the caller's record of that CA.

Every request goes through `exchange`:

- no request is sent while the CA asked us to pause (429 / rateLimited / Retry-After) or
  while it is recorded unreachable, unless this request is the CA's probe;
- badNonce is retried here with a fresh nonce (Pebble rejects 5 % of good nonces);
- every failure maps to TemporaryError / AcmeUnreachableError / AcmeProblemError
  (issuance.acme.protocol.errors);
- a timed-out request is not repeated: the CA is recorded unreachable and asked again by
  one probe, not by every waiting item.

What outlives a request (pauses, reachability, request counts) is kept by the caller: the
client is given a `CaRecord` (the controllers keep one in the database,
issuance.acme.record), so this package only deals in plain values.
"""

from __future__ import annotations

import collections
import logging
import re
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import requests
import urllib3
from django.utils import timezone

from issuance.acme.protocol.errors import (
    BAD_NONCE,
    RATE_LIMITED,
    AcmeProblemError,
    AcmeTemporaryError,
    AcmeUnreachableError,
    problem_type,
)
from issuance.controllers.base import TemporaryError

log = logging.getLogger("issuance.acme.protocol")

BAD_NONCE_RETRIES = 5
# A rate limit without Retry-After: wait this long (Let's Encrypt always sends the header).
DEFAULT_PAUSE = timedelta(minutes=5)


class CaRecord(Protocol):
    """What the client reads and tells about each CA (by directory URL)."""

    def before_request(self, directory_url: str) -> bool:
        """Raise (AcmePausedError, AcmeUnreachableError) to hold the request back; True
        when this request is the CA's probe, False when the CA is simply reachable."""

    def no_answer(self, directory_url: str, error: str, *, probe: bool) -> Exception:
        """The request got no answer at all; the error to raise (AcmeUnreachableError)."""

    def answered(self, directory_url: str, *, probe: bool) -> None:
        """The CA answered (any HTTP response)."""

    def paused(self, directory_url: str, retry_after: timedelta | None, reason: str) -> datetime:
        """The CA asked us to wait; returns when the pause ends."""

    def counted(self, directory_url: str, action: str, result: str) -> None:
        """One request's result (ok, bad_nonce, rate_limited, timeout, ...), for metrics."""


class NoRecord:
    """A CaRecord that keeps nothing (scripts, tests of the wire format)."""

    def before_request(self, directory_url: str) -> bool:
        return False

    def no_answer(self, directory_url: str, error: str, *, probe: bool) -> Exception:
        return AcmeTemporaryError(f"{directory_url}: no answer: {error}")

    def answered(self, directory_url: str, *, probe: bool) -> None:
        return None

    def paused(self, directory_url: str, retry_after: timedelta | None, reason: str) -> datetime:
        return timezone.now() + (retry_after or DEFAULT_PAUSE)

    def counted(self, directory_url: str, action: str, result: str) -> None:
        return None


NO_RECORD = NoRecord()

# In-process counts (tests and the benchmarks read them).
_stats: collections.Counter[str] = collections.Counter()
_server_stats: collections.Counter[tuple[str, str]] = collections.Counter()
_stats_lock = threading.Lock()


def stats() -> dict[str, int]:
    """Requests by result in this process, e.g. {"ok": 120, "bad_nonce": 6}."""
    with _stats_lock:
        return dict(_stats)


def server_stats(directory_url: str) -> dict[str, int]:
    """Requests sent to one CA by result in this process, e.g. {"ok": 80, "timeout": 2}."""
    with _stats_lock:
        return {r: n for (url, r), n in _server_stats.items() if url == directory_url}


def _count(record: CaRecord, directory_url: str, action: str, result: str) -> None:
    with _stats_lock:
        _stats[result] += 1
        _server_stats[(directory_url, result)] += 1
    record.counted(directory_url, action, result)


def exchange(
    record: CaRecord,
    directory_url: str,
    send: Callable[[], requests.Response],
    url: str,
    *,
    action: str,
) -> requests.Response:
    """Run one request to a CA: held back while it is paused or unreachable, badNonce
    retried, any other failure raised as TemporaryError / AcmeUnreachableError /
    AcmeProblemError."""
    bad_nonces = 0
    while True:
        probe = record.before_request(directory_url)
        response = _send(record, directory_url, send, url, action, probe=probe)
        if response.status_code < 400:
            _count(record, directory_url, action, "ok")
            return response
        problem = _problem(response)
        if problem_type(problem.get("type")) == BAD_NONCE:
            _count(record, directory_url, action, "bad_nonce")
            if bad_nonces < BAD_NONCE_RETRIES:
                bad_nonces += 1
                log.debug("badNonce from %s; retrying with a fresh nonce", url)
                continue
            # Never a reason to fail an order: the worker tries again after a backoff.
            raise AcmeTemporaryError(f"{url}: {bad_nonces + 1} badNonce answers in a row")
        raise _refusal(record, directory_url, url, action, response, problem)


def _send(
    record: CaRecord,
    directory_url: str,
    send: Callable[[], requests.Response],
    url: str,
    action: str,
    *,
    probe: bool,
) -> requests.Response:
    """The request itself; no answer at all is recorded (and raised) as such."""
    try:
        response = send()
    except requests.RequestException as exc:
        failure = _network_failure(exc)
        if failure is None:
            _count(record, directory_url, action, "error")
            raise AcmeTemporaryError(f"{url}: {type(exc).__name__}: {exc}") from None
        result, error = failure
        _count(record, directory_url, action, result)
        log.warning("ACME %s %s: no answer: %s", action, url, error)
        unanswered = record.no_answer(directory_url, error, probe=probe)
        if isinstance(unanswered, AcmeUnreachableError) and _never_connected(exc):
            unanswered.request_sent = False
        raise unanswered from None
    record.answered(directory_url, probe=probe)
    return response


def _refusal(
    record: CaRecord,
    directory_url: str,
    url: str,
    action: str,
    response: requests.Response,
    problem: dict[str, Any],
) -> Exception:
    """The error for an answer of 400 or more: a pause of the whole CA, a server error
    (try later) or the CA's problem document."""
    ptype = problem_type(problem.get("type"))
    detail = str(problem.get("detail") or "")
    retry_after = _retry_after(response)
    if response.status_code == 429 or ptype == RATE_LIMITED or retry_after is not None:
        _count(record, directory_url, action, "rate_limited")
        reason = f"{ptype or 'HTTP ' + str(response.status_code)}: {detail}".strip()
        until = record.paused(directory_url, retry_after, reason)
        log.warning("ACME server %s paused until %s: %s", directory_url, until, reason)
        return TemporaryError(
            f"ACME server paused until {until.isoformat()}: {reason}",
            delay=max(until - timezone.now(), timedelta(seconds=1)),
        )
    if response.status_code >= 500:
        _count(record, directory_url, action, "server_error")
        return AcmeTemporaryError(
            f"{url}: HTTP {response.status_code}: {ptype or ''} {detail}".strip()
        )
    _count(record, directory_url, action, "problem")
    return AcmeProblemError(
        ptype, detail, response.status_code, list(problem.get("subproblems") or [])
    )


def _retry_after(response: requests.Response) -> timedelta | None:
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return timedelta(seconds=max(0, int(value.strip())))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when - timezone.now() if when.tzinfo else None


def _problem(response: requests.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and ("type" in body or "detail" in body):
        return body
    text = (response.text or "").strip()[:500]
    return {"type": "", "detail": text or f"HTTP {response.status_code}"}


def _network_failure(exc: requests.RequestException) -> tuple[str, str] | None:
    """(metric result, description) when the CA gave no answer at all; None for anything
    else requests raises (a malformed URL, a certificate that fails verification: the
    CA's configuration, which waiting will not fix)."""
    text = str(exc)
    if isinstance(exc, requests.ConnectTimeout):
        seconds = re.search(r"connect timeout=([\d.]+)", text)
        return "timeout", f"connect timed out after {seconds[1] if seconds else '?'}s"
    if isinstance(exc, requests.Timeout):
        seconds = re.search(r"read timeout=([\d.]+)", text)
        # A TLS handshake that times out is reported the same way, with the connect timeout.
        return "timeout", f"no answer within {seconds[1] if seconds else '?'}s"
    if isinstance(exc, requests.exceptions.SSLError) and "CERTIFICATE_VERIFY_FAILED" in text:
        return None
    if isinstance(exc, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
        return "network_error", _os_error(exc) or f"{type(exc).__name__}: {text}"
    return None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every error wrapped in it (args, urllib3's `reason`, cause, context), each
    once, nearest first: requests and urllib3 nest the OSError that says what happened."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        nested = [a for a in current.args if isinstance(a, BaseException)]
        reason = getattr(current, "reason", None)
        if isinstance(reason, BaseException):
            nested.append(reason)
        nested += [e for e in (current.__cause__, current.__context__) if e is not None]
        todo.extend(nested)


def _os_error(exc: BaseException) -> str:
    """ "connection refused" from the OSError somewhere inside requests' wrapped errors."""
    fallback = ""
    for current in _chain(exc):
        if isinstance(current, OSError):
            if current.strerror:
                return str(current.strerror).lower()
            if current.args and isinstance(current.args[0], str) and not fallback:
                fallback = current.args[0].lower()
    return fallback


def _never_connected(exc: BaseException) -> bool:
    """The failure happened while connecting (refused, connect timeout): no byte of the
    request left, so the CA cannot have acted on it."""
    return any(
        isinstance(
            current,
            urllib3.exceptions.NewConnectionError
            | urllib3.exceptions.ConnectTimeoutError
            | ConnectionRefusedError,
        )
        for current in _chain(exc)
    )
