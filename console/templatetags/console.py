"""Template helpers for the console: badges, countdowns, conditions, paging links."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString

from issuance.durations import format_relative
from issuance.shapes import Condition

register = template.Library()

# Badge colour per state word (certificate, request, order, challenge, condition status).
_BADGE_CLASS = {
    "ready": "ok",
    "issued": "ok",
    "valid": "ok",
    "approved": "ok",
    "true": "ok",
    "issuing": "busy",
    "processing": "busy",
    "presented": "busy",
    "accepted": "busy",
    "scheduled": "busy",
    "pending": "wait",
    "queued": "wait",
    "unknown": "wait",
    "": "wait",
    "failed": "bad",
    "denied": "bad",
    "invalid": "bad",
    "errored": "bad",
    "expired": "bad",
    "false": "bad",
    "self-check failing": "bad",
}


def relative_text(when: datetime, now: datetime | None = None) -> str:
    return format_relative((when - (now or timezone.now())).total_seconds())


@register.simple_tag
def countdown(when: datetime | None, empty: str = "—") -> SafeString:
    """A <time> element live.js ticks locally; the server renders its first text."""
    if when is None:
        return format_html('<span class="muted">{}</span>', empty)
    iso = when.astimezone(UTC).isoformat().replace("+00:00", "Z")
    title = when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return format_html(
        '<time data-countdown="{}" datetime="{}" title="{}">{}</time>',
        iso,
        iso,
        title,
        relative_text(when),
    )


@register.filter
def badge(state: Any) -> SafeString:
    text = str(state or "")
    css = _BADGE_CLASS.get(text.lower(), "wait")
    return format_html('<span class="badge badge-{}">{}</span>', css, text or "queued")


@register.filter
def utc(when: datetime | None) -> str:
    if when is None:
        return "—"
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def condition(obj: Any, type_: str) -> Condition | None:
    getter = getattr(obj, "get_condition", None)
    return getter(type_) if getter else None


@register.filter
def pretty_json(value: Any) -> str:
    # Returned as plain text: autoescape still applies in the template.
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.simple_tag(takes_context=True)
def query_with(context: dict[str, Any], **changes: Any) -> str:
    """The current query string with some parameters replaced (for paging and filter links)."""
    request = context.get("request")
    params = request.GET.copy() if request is not None else QueryDict(mutable=True)
    for key, value in changes.items():
        if value in (None, ""):
            params.pop(key, None)
        else:
            params[key] = str(value)
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"
