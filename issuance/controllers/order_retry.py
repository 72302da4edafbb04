"""An order the CA failed because of its own outage starts again, without backoff.

A CA that was stopped or cut off while it validated a challenge can, once it runs again,
mark that validation failed by its own clock (Pebble: `connection ... context deadline
exceeded`), or let an authorization expire while nobody could reach it. That is the
outage's doing, not the operator's, so it must not send the certificate into the 1 h
failure backoff (issue: "a transient outage does not fail orders").

The rule: when an order turns invalid or expired, and this process recorded the CA as
unreachable at some moment since the current ACME order was started (the CA's AcmeServer
row is unreachable now, or its last outage ended after the attempt began), the Order row
starts a fresh ACME order in place of failing. The failed ACME order is kept in
`Order.restarts` (URL, reason, when), and the order's Challenge rows for it stay as history:
the controller reads only the challenges of its current authorizations.

The Order row stays the request's one Order (one Order per request), and each restart
needs its own outage, at most MAX_RESTARTS times, so a CA that keeps failing an order
while flapping still ends in the failure backoff.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from issuance.models import AcmeServer, Event, Order, OrderState, certificate_name_of
from issuance.observability import events
from issuance.shapes import Restart

# Fresh ACME orders per Order for failures that came with an outage of the CA.
MAX_RESTARTS = 3
RESTARTABLE_STATES = frozenset({OrderState.INVALID, OrderState.EXPIRED})


def attempt_started(order: Order) -> datetime:
    """When the current ACME order was started: the last restart, or the row's creation."""
    restarts = order.typed_restarts
    if restarts:
        return datetime.fromisoformat(restarts[-1]["failedAt"])
    return order.created_at


def outage_during_attempt(order: Order) -> str:
    """The CA's outage that overlapped the current attempt, described; or ""."""
    # The server the attempt was made at (CA fallback), else the issuer's first.
    directory_url = order.server or order.issuer.acme_spec.get("server", "")
    if not directory_url:
        return ""
    row = (
        AcmeServer.objects.filter(directory_url=directory_url)
        .values_list("unreachable_since", "reachable_again_at", "unreachable_error")
        .first()
    )
    if row is None:
        return ""
    since, back, error = row
    if since is not None:
        return f"unreachable since {since.isoformat(timespec='seconds')}: {error}"
    if back is not None and back >= attempt_started(order):
        return f"unreachable until {back.isoformat(timespec='seconds')}: {error}"
    return ""


def restart_after_outage(order: Order, state: str, reason: str) -> bool:
    """Start a fresh ACME order in place of failing, when the rule above allows it (the
    caller reconciles the order again at once)."""
    if state not in RESTARTABLE_STATES or len(order.typed_restarts) >= MAX_RESTARTS:
        return False
    outage = outage_during_attempt(order)
    if not outage:
        return False
    now = timezone.now()
    failed = order.url
    order.restarts = [
        *order.typed_restarts,
        Restart(url=failed, state=state, reason=reason, failedAt=now.isoformat(), outage=outage),
    ]
    # One UPDATE: a crash leaves either the failing order or the clean restart.
    order.url = order.finalize_url = order.certificate_url = ""
    order.state = OrderState.NONE
    order.authorizations = []
    order.create_attempted_at = None
    order.reason = ""
    order.save(
        update_fields=[
            "restarts",
            "url",
            "finalize_url",
            "certificate_url",
            "state",
            "authorizations",
            "create_attempted_at",
            "reason",
            "updated_at",
        ]
    )
    events.record(
        "Order",
        order.name,
        "OrderRestarted",
        f"The CA failed ACME order {failed} ({state}: {reason}) after an outage of the CA "
        f"({outage}); a new ACME order is created, without failure backoff "
        f"(restart {len(order.restarts)} of {MAX_RESTARTS})",
        type_=Event.WARNING,
        certificate_name=certificate_name_of(order),
    )
    return True
