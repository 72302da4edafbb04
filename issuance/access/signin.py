"""Sign-in protection: locks after failed sign-ins, limits on bad tokens, and their audit.

Password sign-ins (the login page, POST /api/v1/token/, /admin/) all go through Django's
authenticate(), where django-axes counts failures in the database (AccessAttempt rows, seen by
every process) and refuses a locked account or address before any password is checked
(console/settings.py: AXES_*). This module reads those rows as locks, lifts them, and records
sign-ins, failures, locks and lifts in the audit log (Event, kind "SignIn"; never a password).

Bad API and bootstrap tokens carry no username, so they do not lock accounts: they count per
address in the "throttle" cache (each web process's memory: every token request reads it,
and a Redis outage must not slow the API) over fixed windows of SIGNIN_LOCK_TIME; past
TOKEN_FAILURE_LIMIT, token requests from the address get 429 with Retry-After until the
window ends. A failing cache lets requests through (logged): tokens are 256-bit secrets and
the limit is a second line.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from axes.models import AccessAttempt
from django.conf import settings
from django.core.cache import caches
from django.db.models import Max, Sum
from django.utils import timezone
from rest_framework.exceptions import Throttled

from issuance.models import Event
from issuance.observability import events

log = logging.getLogger("issuance.access.signin")

KIND = "SignIn"
SIGNED_IN = "SignedIn"
SIGNED_OUT = "SignedOut"
FAILED = "SignInFailed"
REFUSED_LOCKED = "SignInRefusedLocked"
LOCKED = "SignInLocked"
LOCK_LIFTED = "SignInLockLifted"
TOKEN_LIMIT = "TokenFailureLimit"  # noqa: S105 - an audit reason, not a secret

ACCOUNT = "account"
ADDRESS = "address"
_FIELD = {ACCOUNT: "username", ADDRESS: "ip_address"}


def client_address(request: Any) -> str | None:
    """The caller's address: REMOTE_ADDR, which uvicorn sets from X-Forwarded-For only for
    proxies it trusts (--forwarded-allow-ips), so a client cannot pick its own address."""
    address = request.META.get("REMOTE_ADDR")
    return str(address) if address else None


def lock_time() -> timedelta:
    cool_off: timedelta = settings.AXES_COOLOFF_TIME
    return cool_off


# -- audit --------------------------------------------------------------------------------


def _where(request: Any) -> str:
    return f"from {client_address(request) or 'an unknown address'} via {request.path}"


def record(reason: str, name: str, message: str, *, actor: str = "", warning: bool = False) -> None:
    events.record(
        KIND,
        name[:253] or "(no username)",
        reason,
        message,
        actor=actor[:150],
        type_=Event.WARNING if warning else Event.NORMAL,
    )


def signed_in(request: Any, username: str) -> None:
    record(SIGNED_IN, username, f"Signed in {_where(request)}.", actor=username)


def signed_out(request: Any, username: str) -> None:
    record(SIGNED_OUT, username, f"Signed out {_where(request)}.", actor=username)


def failed(request: Any, username: str) -> None:
    """After django-axes' own handler: it has counted the failure (axes_failures_since_start)
    or refused the attempt because of a lock (the password was never checked)."""
    failures = getattr(request, "axes_failures_since_start", None)
    locked = bool(getattr(request, "axes_locked_out", False))
    if failures is None and locked:
        record(
            REFUSED_LOCKED,
            username,
            f"Sign-in refused {_where(request)}: the account or address is locked.",
            warning=True,
        )
        return
    count = f" ({failures} of {settings.AXES_FAILURE_LIMIT})" if failures is not None else ""
    record(FAILED, username, f"Failed sign-in {_where(request)}{count}.", warning=True)
    if locked:
        minutes = int(lock_time().total_seconds() // 60)
        record(
            LOCKED,
            username,
            f"Locked for {minutes} min after {failures} failed sign-ins {_where(request)}.",
            warning=True,
        )


# -- locks --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lock:
    what: str  # ACCOUNT or ADDRESS
    value: str
    failures: int
    last_failure: datetime
    locked_until: datetime


def current_locks(now: datetime | None = None) -> list[Lock]:
    """The accounts and addresses locked now, as django-axes decides: failures within the
    lock time, summed per username and per address, at or past the limit."""
    now = now or timezone.now()
    recent = AccessAttempt.objects.filter(attempt_time__gte=now - lock_time())
    locks: list[Lock] = []
    for what, field in _FIELD.items():
        rows = (
            recent.exclude(**{f"{field}__isnull": True})
            .values(field)
            .annotate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
            .filter(failures__gte=settings.AXES_FAILURE_LIMIT)
            .order_by("-last")
        )
        locks.extend(
            Lock(what, row[field], row["failures"], row["last"], row["last"] + lock_time())
            for row in rows
        )
    return locks


def lock_remaining(username: str | None, address: str | None) -> timedelta:
    """How long the lock on this account or address lasts yet (the longer of the two)."""
    until = [
        lock.locked_until
        for lock in current_locks()
        if (lock.what == ACCOUNT and lock.value == username)
        or (lock.what == ADDRESS and lock.value == address)
    ]
    return max(until) - timezone.now() if until else timedelta(0)


def lift(what: str, value: str, *, actor: str) -> int:
    """Forgets the failures of an account or address (its lock ends now); audited."""
    deleted: int
    deleted, _ = AccessAttempt.objects.filter(**{_FIELD[what]: value}).delete()
    record(
        LOCK_LIFTED,
        value if what == ACCOUNT else f"address {value}",
        f"Lock on {what} {value} lifted ({deleted} failure records forgotten).",
        actor=actor,
    )
    return deleted


# -- bad tokens ---------------------------------------------------------------------------


def _window() -> tuple[str, float]:
    """The current window's number and the seconds left in it."""
    length = max(settings.TOKEN_FAILURE_WINDOW.total_seconds(), 1.0)
    now = time.time()
    index = int(now // length)
    return str(index), (index + 1) * length - now


def _key(address: str, window: str) -> str:
    return f"bad-token:{address}:{window}"


def check_token_address(request: Any) -> None:
    """Before a token is looked up: 429 if this address presented too many bad ones."""
    address = client_address(request)
    if address is None:
        return
    window, left = _window()
    try:
        count = caches["throttle"].get(_key(address, window), 0)
    except Exception:  # any cache failure: let the request through (docstring)
        log.warning("bad-token counter unavailable; not limiting", exc_info=True)
        return
    if count >= settings.TOKEN_FAILURE_LIMIT:
        raise Throttled(wait=left, detail="Too many invalid tokens from this address.")


def token_failed(request: Any, scheme: str) -> None:
    """After a bad token: counts it; the failure that reaches the limit is audited."""
    address = client_address(request)
    if address is None:
        return
    window, left = _window()
    cache = caches["throttle"]
    key = _key(address, window)
    try:
        cache.add(key, 0, timeout=int(left) + 1)
        count = cache.incr(key)
    except Exception:  # as in check_token_address
        log.warning("bad-token counter unavailable; not counting", exc_info=True)
        return
    if count == settings.TOKEN_FAILURE_LIMIT:
        record(
            TOKEN_LIMIT,
            f"address {address}",
            f"{count} invalid {scheme} tokens from {address}: token requests from there "
            f"answer 429 for {int(left)} s.",
            warning=True,
        )
