"""Small typed readers for JSON specs: each reports problems under the field's path."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Collection, Mapping
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

from issuance.models.base import validate_resource_name
from issuance.shapes import SecretKeySelector
from issuance.specs.errors import Errors
from issuance.timing.durations import DurationError, format_duration, parse_duration

# Sentinel for "the key is absent" (None is a value JSON can carry).
MISSING: Any = object()


def check_object(
    value: Any,
    path: str,
    errors: Errors,
    allowed: Collection[str],
    *,
    hints: Mapping[str, str] | None = None,
) -> dict[str, Any] | None:
    """`value` must be an object whose keys are all in `allowed`; unknown keys are errors.

    `hints` explains well-known cert-manager fields we do not support, instead of the
    plain "unsupported field".
    """
    if not isinstance(value, dict):
        errors.add(path, "must be an object")
        return None
    for key in value:
        if key not in allowed:
            hint = (hints or {}).get(key)
            errors.add(
                f"{path}.{key}", f"unsupported field: {hint}" if hint else "unsupported field"
            )
    return value


def opt_str(
    obj: Mapping[str, Any],
    key: str,
    path: str,
    errors: Errors,
    *,
    max_len: int | None = None,
    choices: Collection[str] | None = None,
    allow_empty: bool = False,
) -> str | None:
    value = obj.get(key, MISSING)
    if value is MISSING or value is None:
        return None
    where = f"{path}.{key}"
    if not isinstance(value, str):
        errors.add(where, "must be a string")
        return None
    if not value and not allow_empty:
        errors.add(where, "must not be empty")
        return None
    if max_len is not None and len(value) > max_len:
        errors.add(where, f"must be at most {max_len} characters (got {len(value)})")
        return None
    if choices is not None and value not in choices:
        errors.add(where, f"must be one of {', '.join(choices)} (got {value!r})")
        return None
    return value


def opt_bool(obj: Mapping[str, Any], key: str, path: str, errors: Errors) -> bool | None:
    value = obj.get(key, MISSING)
    if value is MISSING or value is None:
        return None
    if not isinstance(value, bool):
        errors.add(f"{path}.{key}", "must be true or false")
        return None
    return value


def opt_int(
    obj: Mapping[str, Any],
    key: str,
    path: str,
    errors: Errors,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int | None:
    value = obj.get(key, MISSING)
    if value is MISSING or value is None:
        return None
    where = f"{path}.{key}"
    if isinstance(value, bool) or not isinstance(value, int):
        errors.add(where, "must be an integer")
        return None
    if minimum is not None and value < minimum:
        errors.add(where, f"must be at least {minimum} (got {value})")
        return None
    if maximum is not None and value > maximum:
        errors.add(where, f"must be at most {maximum} (got {value})")
        return None
    return int(value)


def opt_list(obj: Mapping[str, Any], key: str, path: str, errors: Errors) -> list[Any] | None:
    value = obj.get(key, MISSING)
    if value is MISSING or value is None:
        return None
    if not isinstance(value, list):
        errors.add(f"{path}.{key}", "must be a list")
        return None
    return value


def opt_str_list(
    obj: Mapping[str, Any], key: str, path: str, errors: Errors, *, max_len: int = 1024
) -> list[str] | None:
    items = opt_list(obj, key, path, errors)
    if items is None:
        return None
    out: list[str] = []
    for i, item in enumerate(items):
        where = f"{path}.{key}[{i}]"
        if not isinstance(item, str) or not item:
            errors.add(where, "must be a non-empty string")
        elif len(item) > max_len:
            errors.add(where, f"must be at most {max_len} characters")
        else:
            out.append(item)
    return out


def opt_duration(
    obj: Mapping[str, Any], key: str, path: str, errors: Errors
) -> tuple[str, timedelta] | None:
    """A positive Go duration; returns (normalized Go string, timedelta)."""
    value = obj.get(key, MISSING)
    if value is MISSING or value is None:
        return None
    where = f"{path}.{key}"
    if not isinstance(value, str):
        errors.add(where, "must be a Go duration string such as '2160h' or '90m'")
        return None
    try:
        delta = parse_duration(value)
    except DurationError as exc:
        errors.add(where, str(exc))
        return None
    if delta.total_seconds() <= 0:
        errors.add(where, f"must be greater than zero (got {value!r})")
        return None
    if delta.total_seconds() < 1:
        errors.add(where, f"must be at least 1s (got {value!r})")
        return None
    whole = timedelta(seconds=int(delta.total_seconds()))
    return format_duration(whole), whole


def opt_resource_name(obj: Mapping[str, Any], key: str, path: str, errors: Errors) -> str | None:
    value = opt_str(obj, key, path, errors, max_len=253)
    if value is None:
        return None
    try:
        validate_resource_name(value)
    except ValidationError as exc:
        errors.add(f"{path}.{key}", " ".join(exc.messages))
        return None
    return value


def secret_key_selector(
    value: Any, path: str, errors: Errors, *, key_required: bool
) -> SecretKeySelector | None:
    """cert-manager's SecretKeySelector {name, key}: a reference to a stored Secret."""
    obj = check_object(value, path, errors, ("name", "key"))
    if obj is None:
        return None
    name = opt_resource_name(obj, "name", path, errors)
    key = opt_str(obj, "key", path, errors, max_len=253)
    if obj.get("name") is None:
        errors.add(f"{path}.name", "is required")
    if key_required and obj.get("key") is None:
        errors.add(f"{path}.key", "is required")
    if name is None:
        return None
    out: SecretKeySelector = {"name": name}
    if key:
        out["key"] = key
    return out


def https_url(value: str, where: str, errors: Errors, *, allow_http: bool = False) -> str | None:
    if len(value) > 1024:
        errors.add(where, "must be at most 1024 characters")
        return None
    schemes = ("https", "http") if allow_http else ("https",)
    try:
        parts = urlsplit(value)
        hostname = parts.hostname
    except ValueError:  # e.g. "https://[" (an unclosed IPv6 address)
        hostname = None
    if not hostname or parts.scheme not in schemes or re.search(r"\s", value):
        errors.add(where, f"must be an {' or '.join(schemes)} URL (got {value!r})")
        return None
    return value


def decode_base64(value: str, where: str, errors: Errors, *, urlsafe: bool = False) -> bytes | None:
    """Strict base64 (whitespace ignored); `urlsafe` also accepts the URL-safe alphabet."""
    text = "".join(value.split())
    if urlsafe:
        text = text.rstrip("=").replace("-", "+").replace("_", "/")
    padded = text + "=" * (-len(text) % 4)
    try:
        return base64.b64decode(padded.encode(), validate=True)
    except (binascii.Error, ValueError):
        errors.add(where, "must be base64-encoded" + (" (URL-safe alphabet)" if urlsafe else ""))
        return None
