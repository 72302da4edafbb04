"""Durations: Go-style for specs (`2160h`, `1h30m`, `90s`, as cert-manager's API uses them),
and a short form for people (`1d 2h`, `59m 58s`) in pages, the CLI and timeline messages."""

from __future__ import annotations

import re
from datetime import timedelta

_UNIT_SECONDS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
# Beyond this a timedelta (and any sane certificate) overflows.
MAX_SECONDS = 100 * 365 * 24 * 3600


class DurationError(ValueError):
    pass


def parse_duration(value: str) -> timedelta:
    """Parse a Go duration string. Raises DurationError on anything else."""
    if not isinstance(value, str):
        raise DurationError("must be a string such as '2160h' or '90m'")
    text = value.strip()
    sign = 1
    if text and text[0] in "+-":
        sign = -1 if text[0] == "-" else 1
        text = text[1:]
    if text == "0":
        return timedelta(0)
    if not text:
        raise DurationError(f"invalid duration {value!r}")
    pos = 0
    total = 0.0
    while pos < len(text):
        match = _PART.match(text, pos)
        if not match:
            raise DurationError(f"invalid duration {value!r}: use units h, m, s, ms (e.g. '2160h')")
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if total > MAX_SECONDS:
        raise DurationError(f"duration {value!r} is too long (more than 100 years)")
    return timedelta(seconds=sign * total)


def format_duration(delta: timedelta) -> str:
    """Format like Go's time.Duration.String() for whole seconds (`2160h0m0s`)."""
    seconds = int(delta.total_seconds())
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{sign}{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{sign}{minutes}m{secs}s"
    return f"{sign}{secs}s"


def format_span(seconds: float) -> str:
    """The two most significant units of a span, for people: `1d 2h`, `2h 3m`, `59m 58s`, `5s`.

    Pages, `certctl` and timeline messages use it; the browser's countdowns
    (static/js/live.js, `humanize`) tick in the same form, so both must change together.
    """
    total = int(abs(seconds) + 0.5)  # half up, as JavaScript's Math.round (round() is half even)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def format_relative(seconds: float) -> str:
    """A moment `seconds` from now, for people: `in 59m 58s`, `5s ago`, `now` (within 1 s)."""
    if abs(seconds) < 1:
        return "now"
    span = format_span(seconds)
    return f"in {span}" if seconds > 0 else f"{span} ago"
