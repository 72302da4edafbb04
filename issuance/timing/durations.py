"""Durations: Go-style for specs (`2160h`, `1h30m`, `90s`, as cert-manager's API uses them),
and a short form for people (`1d 2h`, `59m 58s`) in pages, the CLI and timeline messages."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils.translation import ngettext

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
    (console/static/js/live.js, `humanize`) tick in the same form, so both must change together.
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


# -- durations as people write and read them (the console's forms and pages) ------------
#
# The API and `apply -f` keep cert-manager's Go durations exactly (a manifest applies as
# written); the console's forms also take what people type ("90 days", "90d", "2 weeks",
# "12h30m") and turn it into the Go form before the spec is validated, so stored specs stay
# in Go form and round-trip to cert-manager. Months and years are refused: their length
# varies, and a certificate's lifetime must be exact.

_FRIENDLY_UNITS = {
    "w": 7 * 86400,
    "wk": 7 * 86400,
    "wks": 7 * 86400,
    "week": 7 * 86400,
    "weeks": 7 * 86400,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
}
_FRIENDLY_PART = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*(?:,|\band\b)?", re.IGNORECASE)
FRIENDLY_EXAMPLES = "90d, 90 days, 2 weeks, 2160h or 12h30m"


def parse_friendly_duration(value: str) -> timedelta:
    """A length of time as people write it: `90d`, `90 days`, `2 weeks 3 days`, `1.5h`,
    `12h30m`, or any Go duration (`2160h`, `1h30m0s`, `500ms`). Raises DurationError."""
    text = value.strip() if isinstance(value, str) else ""
    if not text:
        raise DurationError(f"enter a length of time such as {FRIENDLY_EXAMPLES}")
    total = 0.0
    pos = 0
    while pos < len(text):
        match = _FRIENDLY_PART.match(text, pos)
        if not match or match.group(2).lower() not in _FRIENDLY_UNITS:
            break
        total += float(match.group(1)) * _FRIENDLY_UNITS[match.group(2).lower()]
        pos = match.end()
    else:
        if total > MAX_SECONDS:
            raise DurationError(f"{value!r} is too long (more than 100 years)")
        return timedelta(seconds=total)
    try:  # the Go forms the words above do not cover (ms, us, ns, a sign)
        return parse_duration(text)
    except DurationError:
        raise DurationError(
            f"{value!r} is not a length of time: write it like {FRIENDLY_EXAMPLES}"
        ) from None


def go_duration(delta: timedelta) -> str:
    """The shortest Go duration of a whole number of seconds: `2160h`, `12h30m`, `1h5s`, `90s`
    (cert-manager and Go's time.ParseDuration read it)."""
    seconds = int(delta.total_seconds())
    if seconds == 0:
        return "0s"
    sign = "-" if seconds < 0 else ""
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n}{unit}" for n, unit in ((hours, "h"), (minutes, "m"), (secs, "s")) if n]
    return sign + "".join(parts)


def describe_duration(delta: timedelta) -> str:
    """A duration in words, exact to the second: `90 days`, `1 day 12 hours`, `30 minutes`."""
    seconds = int(abs(delta.total_seconds()))
    if seconds == 0:
        return "0 seconds"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    words = []
    if days:
        words.append(ngettext("%(n)d day", "%(n)d days", days) % {"n": days})
    if hours:
        words.append(ngettext("%(n)d hour", "%(n)d hours", hours) % {"n": hours})
    if minutes:
        words.append(ngettext("%(n)d minute", "%(n)d minutes", minutes) % {"n": minutes})
    if secs:
        words.append(ngettext("%(n)d second", "%(n)d seconds", secs) % {"n": secs})
    return ("minus " if delta.total_seconds() < 0 else "") + " ".join(words)


def describe_go_duration(value: object) -> str:
    """A spec's Go duration in words (`2160h0m0s` → `90 days`); what does not parse is
    shown as written."""
    try:
        return describe_duration(parse_duration(str(value)))
    except DurationError:
        return str(value)
