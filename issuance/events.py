"""Recording Events (the timeline) and telling the live layer about them."""

from __future__ import annotations

import logging

from issuance import publish
from issuance.models import Event

log = logging.getLogger("issuance.events")


def record(
    kind: str,
    name: str,
    reason: str,
    message: str = "",
    *,
    type_: str = Event.NORMAL,
    actor: str = "",
    certificate_name: str = "",
) -> Event:
    event = Event.objects.create(
        kind=kind,
        name=name,
        reason=reason,
        message=message[:4000],
        type=type_,
        actor=actor,
        certificate_name=certificate_name,
    )
    log.info("%s/%s %s: %s%s", kind, name, reason, message, f" (by {actor})" if actor else "")
    publish.event_recorded(event)
    return event
