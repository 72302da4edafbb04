"""Notification channels and rules for `apply -f` (kinds NotificationChannel and
NotificationRule, apiVersion issuance.console/v1) and `certctl rules`.

A manifest's spec is the API's body (the same camelCase fields, read by the API's
serializers, so a field added there is accepted here too) and states the whole object: an
optional field left out goes back to its default, as with PUT. The URL and secret of a
channel are never printed; a channel manifest without `secret` keeps the stored one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from issuance.api.errors import flat_errors
from issuance.api.notifications import ChannelUpdateSerializer, RuleFieldsSerializer
from issuance.models import NotificationRule
from issuance.notifications import channel_store, rules

API_VERSION = "issuance.console/v1"
CHANNEL = "NotificationChannel"
RULE = "NotificationRule"
KINDS = (CHANNEL, RULE)

Problems = list[tuple[str, str]]  # (field path, message)


def _serializer_problems(serializer: Any) -> Problems:
    if serializer.is_valid():
        return []
    found = flat_errors(serializer.errors)
    return [
        (f"spec.{path}", " ".join(str(m) for m in messages)) for path, messages in found.items()
    ]


def rule_changes(
    spec: dict[str, Any], channel_exists: Callable[[str], bool]
) -> tuple[dict[str, Any], Problems]:
    """The rule's fields (model names, the optional ones at their defaults when left out)."""
    serializer = RuleFieldsSerializer(data=spec)
    found = _serializer_problems(serializer)
    if found:
        return {}, found
    changes = {**rules.defaults(), **serializer.validated_data}
    errors = rules.problems(None, changes, channel_exists)
    return changes, [(f"spec.{rules.api_name(k)}", v) for k, v in errors.items()]


def channel_input(spec: dict[str, Any]) -> tuple[channel_store.ChannelInput, Problems]:
    serializer = ChannelUpdateSerializer(data=spec)
    found = _serializer_problems(serializer)
    if not found and "url" not in spec:
        found = [("spec.url", "This field is required.")]
    if found:
        return channel_store.ChannelInput(), found
    body = serializer.validated_data
    data = channel_store.ChannelInput(
        url=body["url"],
        secret=body.get("secret"),
        enabled=body.get("enabled", True),
        rate_limit_per_hour=body.get("rateLimitPerHour", channel_store.DEFAULT_RATE_LIMIT),
        digest_hour=body.get("digestHourUtc"),
        digest_hour_set=True,
    )
    names = {"rate_limit_per_hour": "rateLimitPerHour", "digest_hour": "digestHourUtc"}
    errors = channel_store.problems(None, data)
    return data, [(f"spec.{names.get(k, k)}", v) for k, v in errors.items()]


def rule_table(found: Iterable[NotificationRule]) -> str:
    """`certctl rules list`: one line per rule, like `kubectl get`."""
    rows = [("NAME", "CHANNEL", "CONDITION", "THRESHOLD", "NAME PATTERN", "ISSUER PATTERN", "ON")]
    for rule in found:
        rows.append(
            (
                rule.name,
                rule.channel.name,
                rule.condition,
                str(rule.threshold),
                rule.name_pattern or "-",
                rule.issuer_pattern or "-",
                "yes" if rule.enabled else "no",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )
