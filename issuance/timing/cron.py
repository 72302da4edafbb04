"""Five-field cron expressions (minute hour day-of-month month day-of-week), for renewal
windows (cert-manager's `spec.renewal.windows[].cron`).

No cron library is installed (croniter is not in the venv), so this is the classic Vixie
cron grammar, which Go's robfig/cron (cert-manager's) also reads: `*`, numbers, ranges
`a-b`, steps `*/s` `a-b/s` `a/s`, lists `a,b`, month and weekday names (`jan`, `mon`),
weekday 7 = Sunday, `?` as `*`, and the macros @yearly @annually @monthly @weekly @daily
@midnight @hourly. When both day fields are restricted a day matching either one matches
(Vixie's rule); when one starts with `*` both must match.

Times are wall-clock times in the window's time zone: `next_after` walks local (naive)
minutes and maps each candidate to UTC with fold=0, so in a skipped DST hour a 02:30 match
starts at 03:30 (the same offset after the jump, like Vixie cron running skipped jobs at
once) and in a repeated hour a match starts once, at its first occurrence.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
# (name, low, high, names) per field; names map to low + index.
_FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, MONTHS),
    ("day of week", 0, 7, DAYS),
)
# A schedule that never matches (`0 0 30 2 *`) is searched this far, then given up.
SEARCH_YEARS = 8


class CronError(ValueError):
    pass


@dataclass(frozen=True)
class Cron:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday … 6 = Saturday
    days_star: bool
    weekdays_star: bool

    def day_matches(self, moment: datetime) -> bool:
        dom = moment.day in self.days
        dow = (moment.isoweekday() % 7) in self.weekdays
        if self.days_star or self.weekdays_star:
            return dom and dow
        return dom or dow

    def matches(self, moment: datetime) -> bool:
        """Whether this wall-clock minute matches (seconds are ignored)."""
        return (
            moment.minute in self.minutes
            and moment.hour in self.hours
            and moment.month in self.months
            and self.day_matches(moment)
        )

    def next_wall(self, start: datetime) -> datetime | None:
        """The first matching wall-clock minute at or after `start` (naive), or None."""
        moment = start.replace(second=0, microsecond=0, tzinfo=None)
        if moment < start.replace(tzinfo=None):
            moment += timedelta(minutes=1)
        limit = moment.year + SEARCH_YEARS
        while moment.year <= limit:
            if moment.month not in self.months:
                year, month = divmod(moment.month, 12)  # the 1st of the next month
                moment = datetime(moment.year + year, month + 1, 1)
            elif not self.day_matches(moment):
                moment = datetime(moment.year, moment.month, moment.day) + timedelta(days=1)
            elif moment.hour not in self.hours:
                moment = moment.replace(minute=0) + timedelta(hours=1)
            elif moment.minute not in self.minutes:
                moment += timedelta(minutes=1)
            else:
                return moment
        return None

    def next_after(self, after: datetime, zone: ZoneInfo) -> datetime | None:
        """The first match strictly after the aware instant `after`, as an aware UTC time."""
        wall = after.astimezone(zone).replace(tzinfo=None)
        while True:
            found = self.next_wall(wall)
            if found is None:
                return None
            moment = found.replace(tzinfo=zone).astimezone(UTC)
            # fold=0 maps a repeated hour's second pass before `after`: look on.
            if moment > after:
                return moment
            wall = found + timedelta(minutes=1)


def _value(text: str, low: int, high: int, names: tuple[str, ...], field: str) -> int:
    lowered = text.lower()
    if names and lowered in names:
        return low + names.index(lowered)
    if not text.isdigit():
        raise CronError(f"{field}: {text!r} is not a number" + (" or name" if names else ""))
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{field}: {value} is outside {low}-{high}")
    return value


def _field(text: str, index: int) -> frozenset[int]:
    field, low, high, names = _FIELDS[index]
    values: set[int] = set()
    for item in text.split(","):
        if not item:
            raise CronError(f"{field}: empty list item in {text!r}")
        body, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) == 0:
                raise CronError(f"{field}: step {step_text!r} must be a positive number")
            step = int(step_text)
        if body in ("*", "?"):
            first, last = low, high
        elif "-" in body:
            a, _, b = body.partition("-")
            first, last = _value(a, low, high, names, field), _value(b, low, high, names, field)
            if first > last:
                raise CronError(f"{field}: range {body!r} runs backwards")
        else:
            first = _value(body, low, high, names, field)
            last = high if slash else first  # `a/s` is `a-high/s`
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse(expression: str) -> Cron:
    """Parse a 5-field cron expression or macro; CronError names the bad field."""
    if not isinstance(expression, str):
        raise CronError("must be a string such as '0 2 * * 1-5'")
    text = MACROS.get(expression.strip().lower(), expression)
    parts = text.split()
    if len(parts) != 5:
        raise CronError(
            f"needs 5 fields (minute hour day-of-month month day-of-week), got {len(parts)}"
        )
    minutes, hours, days, months, weekdays = (_field(p, i) for i, p in enumerate(parts))
    return Cron(
        minutes=minutes,
        hours=hours,
        days=days,
        months=months,
        weekdays=frozenset(d % 7 for d in weekdays),
        days_star=parts[2].startswith(("*", "?")),
        weekdays_star=parts[4].startswith(("*", "?")),
    )
