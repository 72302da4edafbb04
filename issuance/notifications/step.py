"""The worker's global step: detect every DETECT_INTERVAL (sooner when asked), and deliver on
a thread of its own, so a channel that hangs never holds up the worker loop (each send is
bounded by send.SEND_TIMEOUT; the delivery thread runs one batch at a time)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime

from django.db import close_old_connections
from django.db.models import Q
from django.utils import timezone

from issuance.models import DeliveryState, Event, Notification, NotificationChannel
from issuance.notifications import deliver

log = logging.getLogger("issuance.notifications")

DETECT_INTERVAL = 30.0
DELIVER_INTERVAL = 5.0
# The Step's urgent event (cleared by the worker before it runs the step) and our own flag.
wake = threading.Event()
_requested = threading.Event()

_state = {"detected": 0.0, "delivered": 0.0}
# Wall-clock time of the last detection: a Warning entry in the timeline after it (a failure,
# a paused CA, an ARI move) brings the next detection forward (one indexed EXISTS query
# every DELIVER_INTERVAL instead of waiting up to DETECT_INTERVAL).
_seen: dict[str, datetime] = {}
_sender: list[threading.Thread] = []


def request() -> None:
    """Run detection and delivery at the worker's next loop (a test message was queued)."""
    _requested.set()
    wake.set()


def _deliver_in_thread() -> None:
    try:
        deliver.deliver_due()
    except Exception:
        log.exception("notification delivery failed")
    finally:
        close_old_connections()


def _work_waiting() -> bool:
    now = timezone.now()
    due = Notification.objects.filter(
        Q(state=DeliveryState.PENDING) | Q(state=DeliveryState.RETRYING),
        next_attempt_at__lte=now,
    )
    digests = NotificationChannel.objects.filter(
        digest_hour__isnull=False, notifications__state=DeliveryState.DIGEST
    )
    return due.exists() or digests.exists()


def _warnings_since_detection() -> bool:
    since = _seen.get("detected")
    if since is None:
        return False
    return Event.objects.filter(created_at__gt=since, type=Event.WARNING).exists()


def step() -> bool:
    now = time.monotonic()
    urgent = _requested.is_set()
    _requested.clear()
    did = False
    periodic = now - _state["detected"] >= DETECT_INTERVAL
    soon = now - _state["delivered"] >= DELIVER_INTERVAL
    if urgent or periodic or (soon and _warnings_since_detection()):
        _state["detected"] = now
        _seen["detected"] = timezone.now()
        did = deliver.detect_pass() > 0
    if not (urgent or did or soon):
        return did
    _state["delivered"] = now
    if (_sender and _sender[0].is_alive()) or not _work_waiting():
        return did
    thread = threading.Thread(target=_deliver_in_thread, name="notification-delivery", daemon=True)
    _sender[:] = [thread]
    thread.start()
    return did
