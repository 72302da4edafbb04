"""Creating, changing and deleting notification rules. The Notifications page, the API
(/api/v1/notification-rules/), `certctl rules` and `apply -f` all come here, so a rule is
checked the same way and leaves the same timeline entries whichever way it was made.

The limits are constants here so that the page's form, the API's OpenAPI schema and the
checks below state the same thing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models, transaction

from issuance.models import (
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
    validate_resource_name,
)
from issuance.observability import events

# "test" and "digest" are what the console sends by itself, never what a rule asks for.
CONDITIONS: tuple[str, ...] = tuple(
    c for c in NotificationCondition.values if c not in ("test", "digest")
)
CONDITION_CHOICES = [(c, NotificationCondition(c).label) for c in CONDITIONS]
MAX_THRESHOLD = 100000
THRESHOLD_HELP = (
    "Days for “expiring” and “served certificate expiring” (0: the default, 14), minutes for "
    "“waiting for approval” (0: the default, 30), for “cluster unreachable” (0: the default, "
    "1) and for “endpoint unreachable” (0: the default, 10); unused by the other conditions."
)
PATTERN_MAX = 253
# A pattern is matched (fnmatch) against resource names, which hold only these characters:
# anything else could never match, so it is refused rather than kept as a rule that is silent.
PATTERN_RE = re.compile(r"[a-z0-9.*?\[\]!-]*")
PATTERN_MESSAGE = (
    "Only lowercase letters, digits, . - and the wildcards * ? [ ] ! (names hold no other "
    "characters)."
)
# For forms and serializers (and the OpenAPI schema, which shows \A and \Z as ^ and $). At
# least one character: they skip the validators for an empty pattern, which the schema then
# states as a separate case (oneOf), and two cases that both took "" would not be oneOf.
PATTERN_VALIDATOR = RegexValidator(r"\A[a-z0-9.*?\[\]!-]+\Z", PATTERN_MESSAGE)
PATTERN_HELP = (
    "Only names matching this shell pattern (fnmatch: * ? [seq] [!seq]), e.g. web-*; "
    "empty: every name. Lowercase letters, digits, . - and the wildcards."
)

# The settable fields, read from the model (in its order): a new setting, such as a boolean
# notify_resolved, is checked and applied here without a change; only the API's serializers
# name it.
FIELDS: tuple[str, ...] = tuple(
    f.name
    for f in NotificationRule._meta.concrete_fields
    if f.editable and f.name not in ("id", "name")
)
BOOLEAN_FIELDS = frozenset(
    f.name for f in NotificationRule._meta.concrete_fields if isinstance(f, models.BooleanField)
)


class RuleError(Exception):
    """Field errors keyed by model field name: {"channel": "…"}."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class Saved:
    rule: NotificationRule
    outcome: str  # "created", "configured" or "unchanged" (kubectl's words)


def channel_in_database(name: str) -> bool:
    return NotificationChannel.objects.filter(name=name).exists()


def _check_value(
    field: str, value: Any, channel_exists: Callable[[str], bool] = channel_in_database
) -> str | None:
    """What is wrong with one field's value, or None."""
    if field == "channel":
        if not isinstance(value, str) or not value:
            return "This field is required."
        if not channel_exists(value):
            return f"No notification channel named {value!r}."
    elif field == "condition":
        if value not in CONDITIONS:
            return f"Must be one of: {', '.join(CONDITIONS)}."
    elif field == "threshold":
        if isinstance(value, bool) or not isinstance(value, int):
            return "Must be a whole number."
        if not 0 <= value <= MAX_THRESHOLD:
            return f"Must be from 0 to {MAX_THRESHOLD}."
    elif field in ("name_pattern", "issuer_pattern"):
        if not isinstance(value, str):
            return "Must be text."
        if len(value) > PATTERN_MAX:
            return f"At most {PATTERN_MAX} characters."
        if not PATTERN_RE.fullmatch(value):
            return PATTERN_MESSAGE
    elif field in BOOLEAN_FIELDS and not isinstance(value, bool):
        return "Must be true or false."
    return None


def api_name(field: str) -> str:
    """name_pattern → namePattern: the API's and the manifests' name of a model field."""
    head, *rest = field.split("_")
    return head + "".join(part.title() for part in rest)


def check_name(name: Any) -> str | None:
    if not isinstance(name, str):
        return "Must be text."
    try:
        validate_resource_name(name)
    except ValidationError as exc:
        return " ".join(exc.messages)
    return None


def problems(
    name: str | None,
    changes: dict[str, Any],
    channel_exists: Callable[[str], bool] = channel_in_database,
) -> dict[str, str]:
    """Every field error of a rule `name` (None: an existing rule, name unchanged) given the
    settable fields in `changes`; unknown fields are errors too. `channel_exists` lets
    `apply -f` count the channels of the same file."""
    errors: dict[str, str] = {}
    if name is not None:
        problem = check_name(name)
        if problem is None and NotificationRule.objects.filter(name=name).exists():
            problem = f"A rule named {name!r} already exists."
        if problem:
            errors["name"] = problem
    for field, value in changes.items():
        problem = (
            "Unknown field." if field not in FIELDS else _check_value(field, value, channel_exists)
        )
        if problem:
            errors[field] = problem
    return errors


def _describe(rule: NotificationRule) -> str:
    return f"{rule.get_condition_display()} → {rule.channel.name}"


def create(name: str, changes: dict[str, Any], actor: str) -> NotificationRule:
    """A new rule; `changes` needs channel and condition. Raises RuleError (nothing stored)."""
    errors = problems(name, changes)
    for required in ("channel", "condition"):
        if required not in changes:
            errors.setdefault(required, "This field is required.")
    if errors:
        raise RuleError(errors)
    rule = NotificationRule(name=name)
    _set(rule, changes)
    with transaction.atomic():
        rule.save()
        events.record(
            "NotificationRule",
            rule.name,
            "Created",
            f"Rule {rule.name}: {_describe(rule)}",
            actor=actor,
        )
    return rule


def _set(rule: NotificationRule, changes: dict[str, Any]) -> list[str]:
    """Apply checked changes to the (unsaved) rule; the fields that changed."""
    changed: list[str] = []
    for field in FIELDS:
        if field not in changes:
            continue
        if field == "channel":
            if rule.channel_id is None or rule.channel.name != changes[field]:
                rule.channel = NotificationChannel.objects.get(name=changes[field])
                changed.append(field)
        elif getattr(rule, field) != changes[field]:
            setattr(rule, field, changes[field])
            changed.append(field)
    return changed


def update(rule: NotificationRule, changes: dict[str, Any], actor: str) -> Saved:
    """Change the given fields of a rule (the others stay). Raises RuleError (nothing stored)."""
    errors = problems(None, changes)
    if errors:
        raise RuleError(errors)
    changed = _set(rule, changes)
    if not changed:
        return Saved(rule, "unchanged")
    with transaction.atomic():
        rule.save()
        events.record(
            "NotificationRule",
            rule.name,
            "Updated",
            f"Rule {rule.name} changed ({', '.join(changed)}): {_describe(rule)}",
            actor=actor,
        )
    return Saved(rule, "configured")


def defaults() -> dict[str, Any]:
    """The model's defaults of the optional fields: what a field left out of a whole
    description of a rule (PUT, a manifest) becomes."""
    return {
        f.name: f.get_default()
        for f in NotificationRule._meta.concrete_fields
        if f.name in FIELDS and f.name not in ("channel", "condition")
    }


def replace(name: str, changes: dict[str, Any], actor: str) -> Saved:
    """Create the rule, or make it exactly `changes` (the optional fields left out go back to
    their defaults): PUT and `apply -f`; applying the same thing again is "unchanged"."""
    rule = NotificationRule.objects.select_related("channel").filter(name=name).first()
    if rule is None:
        return Saved(create(name, changes, actor), "created")
    whole = {**defaults(), **changes}
    errors = {f: "This field is required." for f in ("channel", "condition") if f not in changes}
    if errors:
        raise RuleError({**errors, **problems(None, whole)})
    return update(rule, whole, actor)


def delete(rule: NotificationRule, actor: str) -> None:
    with transaction.atomic():
        name = rule.name
        rule.delete()
        events.record("NotificationRule", name, "Deleted", f"Rule {name} deleted", actor=actor)
