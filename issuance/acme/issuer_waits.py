"""Waiting on a condition of the whole issuer once, not once per object.

An ACME issuer without a registered account cannot make an order, answer a challenge or
revoke anything, however many Orders, Challenges and Revocations it has. Each of them used to
retry on its own 5 s timer: with 3,000 orders of such an issuer a worker reconciled about
220 items a second for nothing, and the work that could be done waited behind them.

Now the issuer is the one thing that retries (its controller registers the account,
issuance/acme/issuer.py), and the objects that need the account are parked:
`IssuerWaitError` is a TemporaryError whose delay is only a safety net (`SAFETY_NET`), so
the row is released far out with `error_count` raised and `last_error` naming the issuer.
When the account is registered, `wake_waiters` makes the issuer's waiting rows due at once
in the same transaction as the stored account (one UPDATE per table), so a worker that
dies between the two leaves nothing parked for the safety net to find.

The other issuer-wide conditions already wait this way: a CA that does not answer
(health.py: one probe, and its first answer wakes the waiters) and a CA's pause
(ratelimit.py: every waiter is due when the pause ends, once).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q, QuerySet
from django.utils import timezone

from issuance.controllers.base import TemporaryError
from issuance.models import Challenge, Issuer, Order, Revocation
from issuance.worker import wakeup

# A waiter looks again on its own only this often: the issuer's wake-up is what ends the
# wait. It is the issuer controller's own recheck of a refused registration
# (acme/issuer.py NOT_READY_RECHECK), so no waiter looks more often than its issuer does.
SAFETY_NET = timedelta(minutes=10)
# The kinds that need the issuer's account (each has an `issuer` foreign key).
WAITING_KINDS: tuple[type[Order | Challenge | Revocation], ...] = (
    Order,
    Challenge,
    Revocation,
)


class IssuerWaitError(TemporaryError):
    """This object waits on its issuer (no ACME account yet): parked until woken."""

    def __init__(self, message: str) -> None:
        super().__init__(message, delay=SAFETY_NET)


def no_account(issuer: Issuer) -> IssuerWaitError:
    return IssuerWaitError(f"Issuer {issuer.name} has no registered ACME account yet")


def waiting_rows(model: type[Order | Challenge | Revocation], issuer_id: int) -> QuerySet[Any]:
    """The rows of `model` that wait on the issuer: released after an error (error_count),
    or held by a worker right now (which may be deciding to wait); not the finished ones."""
    rows: QuerySet[Any] = model._default_manager.filter(issuer_id=issuer_id, due_at__isnull=False)
    return rows.filter(Q(error_count__gt=0) | ~Q(lease_owner=""))


def wake_waiters(issuer: Issuer, now: datetime | None = None) -> int:
    """Make everything that waits on `issuer` due now (wake_seq bumped, so a worker holding
    a row keeps it due: wakeup.wake). Call it in the transaction that clears the condition;
    the workers are told after the commit. Returns how many rows were woken."""
    when = now or timezone.now()
    woken = 0
    for model in WAITING_KINDS:
        woken += waiting_rows(model, issuer.pk).update(due_at=when, wake_seq=F("wake_seq") + 1)
    if woken:
        wakeup.woken()
    return woken
