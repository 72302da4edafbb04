"""Kubernetes labels: a Certificate's `metadata.labels`, an ACME solver's
`selector.matchLabels`, and a secretTemplate's keys, checked as the Kubernetes API server
checks an object's metadata (apimachinery's IsQualifiedName and IsValidLabelValue)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from issuance.specs.errors import Errors

# Kubernetes' qualified name: an optional DNS-subdomain prefix and '/', then a name.
NAME_PATTERN: Final = "[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_NAME: Final = re.compile(f"^{NAME_PATTERN}$")
_PREFIX: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_NAME: Final = 63
MAX_PREFIX: Final = 253
# A label value: empty, or a name's characters (the OpenAPI schema states it as it is).
VALUE_PATTERN: Final = f"^({NAME_PATTERN})?$"
MAX_VALUE: Final = 63
VALUE_RULE: Final = (
    f"a label value must be empty or 1-{MAX_VALUE} letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit"
)
KEY_RULE: Final = (
    f"a label key is an optional lower-case DNS subdomain (at most {MAX_PREFIX} characters) "
    f"and '/', then 1-{MAX_NAME} letters, digits, '-', '_' or '.', starting and ending with "
    "a letter or digit"
)


def key_problem(key: str) -> str | None:
    """Why `key` is not a Kubernetes label or annotation key, or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > MAX_PREFIX or not _PREFIX.fullmatch(prefix)):
        return f"{key!r}: the prefix before '/' must be a lower-case DNS subdomain"
    if len(name) > MAX_NAME or not _NAME.fullmatch(name):
        return (
            f"{key!r}: the name must be 1-{MAX_NAME} letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def value_problem(value: str) -> str | None:
    """Why `value` is not a Kubernetes label value, or None."""
    if value and (len(value) > MAX_VALUE or not _NAME.fullmatch(value)):
        return VALUE_RULE
    return None


def validate_labels(value: Any, path: str, errors: Errors) -> dict[str, str]:
    """A map of label keys to label values, sorted by key (a re-ordered manifest is no
    change); every bad key or value is an error at `path[key]`. null is no labels."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors.add(path, "must be an object of key: string")
        return {}
    out: dict[str, str] = {}
    for key in sorted(value, key=str):
        where = f"{path}[{key}]"
        text = value[key]
        problem = key_problem(key) if isinstance(key, str) else "a label key must be a string"
        if problem is None and not isinstance(text, str):
            problem = "must be a string (quote numbers and booleans in YAML)"
        if problem is None:
            problem = value_problem(text)
        if problem:
            errors.add(where, problem)
        else:
            out[key] = text
    return out
