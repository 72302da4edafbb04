"""issuance/timing/cron.py: the parser against hand-checked cases, the fast search against a
minute-by-minute scan (property-based), and DST in a real time zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from issuance.timing import cron

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


@pytest.mark.parametrize(
    ("expression", "field", "values"),
    [
        ("*/15 * * * *", "minutes", {0, 15, 30, 45}),
        ("5-10/2 * * * *", "minutes", {5, 7, 9}),
        ("50/5 * * * *", "minutes", {50, 55}),
        ("0 1,3,22 * * *", "hours", {1, 3, 22}),
        ("0 0 * jan,mar-may *", "months", {1, 3, 4, 5}),
        ("0 0 * * mon-fri", "weekdays", {1, 2, 3, 4, 5}),
        ("0 0 * * 5-7", "weekdays", {5, 6, 0}),
        ("0 0 * * SUN", "weekdays", {0}),
        ("@hourly", "minutes", {0}),
    ],
)
def test_fields(expression: str, field: str, values: set[int]) -> None:
    assert set(getattr(cron.parse(expression), field)) == values


@pytest.mark.parametrize(
    ("expression", "words"),
    [
        ("* * * *", "5 fields"),
        ("60 * * * *", "minute: 60 is outside 0-59"),
        ("* 24 * * *", "hour: 24"),
        ("* * 0 * *", "day of month: 0"),
        ("* * * foo *", "month: 'foo'"),
        ("* * * * 8", "day of week: 8"),
        ("*/0 * * * *", "step"),
        ("5-1 * * * *", "runs backwards"),
        ("1,,2 * * * *", "empty list item"),
    ],
)
def test_errors_name_the_field(expression: str, words: str) -> None:
    with pytest.raises(cron.CronError, match=words):
        cron.parse(expression)


def test_day_fields_or_when_both_restricted_and_when_one_is_star() -> None:
    both = cron.parse("0 0 13 * fri")  # the 13th, or any Friday
    assert both.matches(datetime(2026, 3, 13))  # a Friday the 13th
    assert both.matches(datetime(2026, 3, 6))  # a Friday
    assert both.matches(datetime(2026, 4, 13))  # a Monday the 13th
    assert not both.matches(datetime(2026, 4, 14))
    one = cron.parse("0 0 */2 * fri")  # a star-step day field: both must match
    assert one.matches(datetime(2026, 3, 13))
    assert not one.matches(datetime(2026, 3, 6))  # Friday the 6th: even day


def test_impossible_date_gives_up() -> None:
    assert cron.parse("0 0 30 2 *").next_wall(datetime(2026, 1, 1)) is None
    leap = cron.parse("0 12 29 2 *").next_wall(datetime(2026, 1, 1))
    assert leap == datetime(2028, 2, 29, 12, 0)


# -- property: the fast search equals a minute-by-minute scan ----------------------------------


def _item(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high)
    ranges = st.tuples(number, number).map(lambda ab: f"{min(ab)}-{max(ab)}")
    steps = st.tuples(st.sampled_from(["*", f"{low}"]), st.integers(1, high - low + 1)).map(
        lambda xs: f"{xs[0]}/{xs[1]}"
    )
    return st.one_of(st.just("*"), number.map(str), ranges, steps)


def _field(low: int, high: int) -> st.SearchStrategy[str]:
    return st.lists(_item(low, high), min_size=1, max_size=3).map(",".join)


expressions = st.tuples(
    _field(0, 59), _field(0, 23), _field(1, 31), _field(1, 12), _field(0, 7)
).map(" ".join)
starts = st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2035, 12, 31))


@settings(max_examples=300, deadline=None)
@given(expressions, starts)
def test_next_wall_is_the_first_minute_that_matches(expression: str, start: datetime) -> None:
    parsed = cron.parse(expression)
    found = parsed.next_wall(start)
    begin = start.replace(second=0, microsecond=0)
    if begin < start:
        begin += timedelta(minutes=1)
    # Every minute before the answer (up to two days of them) does not match.
    moment = begin
    horizon = begin + timedelta(days=2)
    while moment < horizon and (found is None or moment < found):
        assert not parsed.matches(moment), (expression, moment, found)
        moment += timedelta(minutes=1)
    if found is not None:
        assert found >= begin
        assert parsed.matches(found)


@settings(max_examples=200, deadline=None)
@given(expressions, starts, st.sampled_from([UTC, BERLIN, NEW_YORK]))
def test_next_after_is_strictly_later_and_matches_on_the_wall(
    expression: str, start: datetime, zone: ZoneInfo
) -> None:
    parsed = cron.parse(expression)
    after = start.replace(tzinfo=UTC)
    found = parsed.next_after(after, zone)
    if found is None:
        return
    assert found > after
    wall = found.astimezone(zone).replace(tzinfo=None)
    # A match in a skipped hour starts after the jump: its wall time moved forward by 1 h.
    assert parsed.matches(wall) or parsed.matches(wall - timedelta(hours=1))


# -- DST ---------------------------------------------------------------------------------------


def test_spring_forward_skipped_hour_starts_after_the_jump() -> None:
    # Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST; 02:30 does not exist that day.
    daily = cron.parse("30 2 * * *")
    before = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)
    found = daily.next_after(before, BERLIN)
    assert found == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)  # 03:30 CEST
    following = daily.next_after(found, BERLIN)
    assert following == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)  # 02:30 CEST


def test_fall_back_repeated_hour_starts_once() -> None:
    # New York, 2026-11-01: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice.
    daily = cron.parse("30 1 * * *")
    first = daily.next_after(datetime(2026, 10, 31, 12, 0, tzinfo=UTC), NEW_YORK)
    assert first == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
    again = daily.next_after(first, NEW_YORK)
    assert again == datetime(2026, 11, 2, 6, 30, tzinfo=UTC)  # next day, 01:30 EST


def test_local_time_follows_the_offset_across_the_change() -> None:
    nine = cron.parse("0 9 * * *")
    winter = nine.next_after(datetime(2026, 3, 27, 12, 0, tzinfo=UTC), BERLIN)
    summer = nine.next_after(datetime(2026, 3, 29, 12, 0, tzinfo=UTC), BERLIN)
    assert winter == datetime(2026, 3, 28, 8, 0, tzinfo=UTC)
    assert summer == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)
