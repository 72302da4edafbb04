"""`spec.renewal` of a Certificate, as cert-manager 1.21's: a policy (RenewBefore, the
default, or Disabled) and windows within which renewals may start."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from issuance.shapes import RenewalSpec, RenewalWindow
from issuance.specs.errors import Errors
from issuance.specs.fields import check_object, opt_duration, opt_str
from issuance.timing import cron
from issuance.timing.renewal import POLICY_DISABLED, POLICY_RENEW_BEFORE

RENEWAL_FIELDS = ("policy", "windows")
WINDOW_FIELDS = ("cron", "timezone", "windowDuration")
POLICIES = (POLICY_RENEW_BEFORE, POLICY_DISABLED)
MAX_WINDOWS = 16


def validate_renewal(value: Any, path: str, errors: Errors) -> RenewalSpec | None:
    """The normalized `spec.renewal`, or None (errors added, each naming its field)."""
    obj = check_object(value, path, errors, RENEWAL_FIELDS)
    if obj is None:
        return None
    out: RenewalSpec = {}
    policy = opt_str(obj, "policy", path, errors, choices=POLICIES)
    if policy:
        out["policy"] = policy
    windows = obj.get("windows")
    if isinstance(windows, dict):
        windows = [windows]  # one window written as an object
    if windows is None:
        return out
    if not isinstance(windows, list):
        errors.add(f"{path}.windows", "must be a list of {cron, timezone, windowDuration}")
        return out
    if len(windows) > MAX_WINDOWS:
        errors.add(f"{path}.windows", f"at most {MAX_WINDOWS} windows")
        return out
    out["windows"] = [
        w for i, item in enumerate(windows) if (w := _window(item, f"{path}.windows[{i}]", errors))
    ]
    return out


def _window(value: Any, path: str, errors: Errors) -> RenewalWindow | None:
    obj = check_object(value, path, errors, WINDOW_FIELDS)
    if obj is None:
        return None
    ok = True
    expression = opt_str(obj, "cron", path, errors, max_len=200)
    if expression is None:
        if obj.get("cron") is None:
            errors.add(f"{path}.cron", "is required (a cron expression such as '0 2 * * 1-5')")
        ok = False
    else:
        try:
            parsed = cron.parse(expression)
        except cron.CronError as exc:
            errors.add(f"{path}.cron", str(exc))
            ok = False
        else:
            # `0 0 30 2 *` parses but never opens: the certificate would never renew.
            if parsed.next_wall(datetime(2024, 1, 1)) is None:
                errors.add(f"{path}.cron", f"{expression!r} matches no date")
                ok = False
    zone = opt_str(obj, "timezone", path, errors, max_len=100) or "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        errors.add(
            f"{path}.timezone", f"unknown time zone {zone!r} (an IANA name such as Europe/Berlin)"
        )
        ok = False
    duration = opt_duration(obj, "windowDuration", path, errors)
    if duration is None:
        if obj.get("windowDuration") is None:
            errors.add(f"{path}.windowDuration", "is required (a Go duration such as '4h')")
        ok = False
    if not ok or expression is None or duration is None:
        return None
    return {"cron": expression.strip(), "timezone": zone, "windowDuration": duration[0]}
