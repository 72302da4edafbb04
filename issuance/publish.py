"""The one way live updates leave the domain (DESIGN §1, §4).

Messages are sent only after the surrounding transaction commits. Issue 4 fills in the
channel-layer side; until then this module only defines the seam and stays cheap.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.db import transaction

if TYPE_CHECKING:
    from issuance.models import Event

log = logging.getLogger("issuance.publish")

# Subscribers get (group, message) after commit. The console registers the channel layer.
_subscribers: list[Callable[[str, dict[str, Any]], None]] = []


def subscribe(callback: Callable[[str, dict[str, Any]], None]) -> None:
    if callback not in _subscribers:
        _subscribers.append(callback)


def send(group: str, message: dict[str, Any]) -> None:
    """Queue `message` for `group` once the current transaction commits."""

    def deliver() -> None:
        for callback in list(_subscribers):
            try:
                callback(group, message)
            except Exception:  # a broken live channel must never break issuance
                log.exception("live update to %s failed", group)

    if _subscribers:
        transaction.on_commit(deliver)


def event_recorded(event: Event) -> None:
    payload = {
        "type": "event.recorded",
        "kind": event.kind,
        "name": event.name,
        "reason": event.reason,
        "message": event.message,
        "eventType": event.type,
        "actor": event.actor,
        "at": event.created_at.isoformat(),
    }
    if event.certificate_name:
        send(f"certificate.{event.certificate_name}", payload)
    send("dashboard", payload)
