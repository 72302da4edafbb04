"""Template helpers for the console: badges, countdowns, conditions, paging links."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString, mark_safe

from issuance.shapes import Condition
from issuance.timing.durations import describe_go_duration, format_relative

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
    # Deployments (issuance/probing/deployment.py)
    "deployed": "ok",
    "deploying": "busy",
    "unchecked": "wait",
    "stale": "bad",
    "deployed: stale": "bad",
    "mismatch": "bad",
    "unreachable": "bad",
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
def duration_words(value: Any) -> str:
    """A spec's Go duration as people read it: `2160h0m0s` → `90 days`."""
    return describe_go_duration(value) if value else ""


# After these, inside a longer token (a URL, a DNS name, an ACME error URN, a host:port).
_BREAK_AFTER = re.compile(r"([/.:_=@,?])(?=[^\s/.:_=@,?])")


@register.filter(needs_autoescape=True)
def breakable(value: Any, autoescape: bool = True) -> SafeString:
    """`value` with line-break opportunities (<wbr>) after the separators inside long tokens,
    so a narrow cell wraps "urn:ietf:params:acme:error:rejectedIdentifier" or
    "api.payments.example.test" between its parts instead of mid-word. The separators are
    never part of an HTML entity (&amp;, &#x27;), so escaping first is safe."""
    text = conditional_escape(value) if autoescape else str(value)
    return mark_safe(_BREAK_AFTER.sub(r"\1<wbr>", str(text)))  # noqa: S308 - escaped above


@register.filter
def fingerprint(value: Any) -> str:
    """A hex digest as people compare it with `openssl x509 -fingerprint`: `AB:CD:…` (and
    breakable at the colons where a phone's card is narrow)."""
    text = str(value or "").upper()
    return ":".join(text[i : i + 2] for i in range(0, len(text), 2))


@register.filter
def item_at(items: Sequence[Any], index: int) -> Any:
    """items[index], or "" past the end: a chart data cell's column name (its data-label,
    shown beside the value when rows become cards on a phone)."""
    return items[index] if 0 <= index < len(items) else ""


@register.filter
def secret_template(spec: Any, part: str) -> list[tuple[str, str]]:
    """`spec.secretTemplate.labels` or `.annotations` as sorted (key, value) pairs: a
    template's own `.items` lookup would find a label called "items" instead."""
    template = spec.get("secretTemplate") if isinstance(spec, dict) else None
    values = template.get(part) if isinstance(template, dict) else None
    return sorted(values.items()) if isinstance(values, dict) else []


@register.filter
def label_pairs(labels: Any) -> list[tuple[str, str]]:
    """A Certificate's labels as sorted (key, value) pairs (`labels.items` in a template
    would find a label called "items" instead)."""
    return sorted(labels.items()) if isinstance(labels, dict) else []


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
