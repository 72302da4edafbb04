"""The challenge scheduler's rules, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django import Settings

from issuance.controllers import scheduler
from issuance.controllers.scheduler import Candidate, allocate, format_timeout
from issuance.models import Challenge, Event, Order
from tests.factories import make_acme_issuer, make_challenge, make_order, queue

pytestmark = pytest.mark.django_db


def processing_names() -> list[str]:
    return sorted(Challenge.objects.filter(processing=True).values_list("dns_name", flat=True))


@pytest.fixture
def order() -> Order:
    return make_order(make_acme_issuer())


def test_schedules_oldest_first_up_to_the_cap(order: Order, settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 3
    start = timezone.now() - timedelta(hours=1)
    # Created newest-first, so ids and ages disagree: age must win.
    for i in range(6):
        make_challenge(order, f"n{i}.example.test", created_at=start - timedelta(seconds=i))
    assert scheduler.schedule_pass() is True
    assert processing_names() == ["n3.example.test", "n4.example.test", "n5.example.test"]
    scheduled = Challenge.objects.filter(processing=True)
    assert all(c.scheduled_at is not None and c.due_at is not None for c in scheduled)
    assert all(c.wake_seq == 1 for c in scheduled)


def test_at_the_cap_schedules_none(order: Order, settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 2
    queue(order, ["a.example.test", "b.example.test", "c.example.test"])
    assert scheduler.schedule_pass() is True
    before = processing_names()
    assert len(before) == 2
    assert scheduler.schedule_pass() is False
    assert processing_names() == before
    assert Challenge.objects.filter(processing=False, finished=False).count() == 1


def test_one_per_name_and_type(order: Order, settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 10
    start = timezone.now() - timedelta(minutes=10)
    first = make_challenge(order, "same.example.test", created_at=start)
    second = make_challenge(order, "same.example.test", created_at=start + timedelta(seconds=1))
    other_type = make_challenge(
        order, "same.example.test", "dns-01", created_at=start + timedelta(seconds=2)
    )
    scheduler.schedule_pass()
    first.refresh_from_db()
    second.refresh_from_db()
    other_type.refresh_from_db()
    assert first.processing
    assert not second.processing  # same (dnsName, type) waits for the older one
    assert other_type.processing  # another type for the same name may run
    # Still blocked while the first runs; scheduled once it is done.
    assert scheduler.schedule_pass() is False
    Challenge.objects.filter(pk=first.pk).update(processing=False, finished=True, state="valid")
    assert scheduler.schedule_pass() is True
    second.refresh_from_db()
    assert second.processing


def test_key_already_processing_is_dropped_even_if_oldest(order: Order, settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 10
    now = timezone.now()
    make_challenge(order, "busy.example.test", created_at=now, processing=True, scheduled_at=now)
    old = make_challenge(order, "busy.example.test", created_at=now - timedelta(hours=2))
    fresh = make_challenge(order, "free.example.test", created_at=now - timedelta(minutes=1))
    assert scheduler.schedule_pass() is True
    old.refresh_from_db()
    fresh.refresh_from_db()
    assert not old.processing
    assert fresh.processing


def test_finished_challenges_are_never_scheduled(order: Order, settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 10
    done = make_challenge(order, "done.example.test", finished=True, state="valid")
    assert scheduler.schedule_pass() is False
    done.refresh_from_db()
    assert not done.processing


def test_stuck_challenge_times_out_and_frees_its_slot(order: Order, settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 1
    settings.CHALLENGE_PROCESSING_TIMEOUT = timedelta(hours=1)
    now = timezone.now()
    stuck = make_challenge(
        order,
        "stuck.example.test",
        created_at=now - timedelta(hours=3),
        processing=True,
        presented=True,
        scheduled_at=now - timedelta(minutes=61),
        state="pending",
    )
    waiting = make_challenge(order, "next.example.test", created_at=now - timedelta(hours=2))
    recent = make_challenge(order, "recent.example.test", created_at=now - timedelta(hours=1))
    Challenge.objects.filter(pk=recent.pk).update(finished=True, state="valid")

    assert scheduler.schedule_pass() is True
    stuck.refresh_from_db()
    waiting.refresh_from_db()
    order.refresh_from_db()
    assert stuck.state == "errored"
    assert stuck.reason == "timed out after 1h in processing"
    assert stuck.finished and not stuck.processing
    assert stuck.presented  # the controller removes the answer; woken for it
    assert stuck.due_at is not None
    assert order.due_at is not None  # the order learns of the failure
    assert waiting.processing  # the freed slot is used in the same pass
    event = Event.objects.get(kind="Challenge", name=stuck.name, reason="TimedOut")
    assert event.type == Event.WARNING
    certificate = order.request.certificate
    assert certificate is not None
    assert event.certificate_name == certificate.name


def test_processing_within_the_timeout_is_left_alone(order: Order, settings: Settings) -> None:
    settings.CHALLENGE_PROCESSING_TIMEOUT = timedelta(hours=1)
    now = timezone.now()
    running = make_challenge(
        order, "run.example.test", processing=True, scheduled_at=now - timedelta(minutes=59)
    )
    scheduler.schedule_pass()
    running.refresh_from_db()
    assert running.processing and not running.finished and running.state == ""


def test_fair_share_between_issuers(settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 6
    big = make_order(make_acme_issuer("big"))
    small = make_order(make_acme_issuer("small"))
    start = timezone.now() - timedelta(hours=1)
    # The big issuer's ten challenges are all older than the small issuer's two.
    queue(big, [f"b{i}.example.test" for i in range(10)], start)
    queue(small, ["s0.example.test", "s1.example.test"], start + timedelta(minutes=5))
    scheduler.schedule_pass()
    running = Challenge.objects.filter(processing=True)
    by_issuer = {name: running.filter(issuer__name=name).count() for name in ("big", "small")}
    # Share is ceil(6/2) = 3; small uses 2, its unused slot goes to big.
    assert by_issuer == {"big": 4, "small": 2}
    assert sorted(running.filter(issuer__name="big").values_list("dns_name", flat=True)) == [
        f"b{i}.example.test" for i in range(4)
    ]


def test_issuer_over_its_share_waits_while_others_wait(settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 6
    a = make_order(make_acme_issuer("a"))
    b = make_order(make_acme_issuer("b"))
    now = timezone.now()
    for i in range(4):
        make_challenge(a, f"run{i}.example.test", processing=True, scheduled_at=now)
    queue(a, [f"a{i}.example.test" for i in range(5)], now - timedelta(hours=2))
    queue(b, [f"b{i}.example.test" for i in range(5)], now - timedelta(hours=1))
    assert scheduler.schedule_pass() is True
    # a holds 4 ≥ its share of 3: both free slots go to b, although a's are older.
    assert Challenge.objects.filter(processing=True, issuer__name="b").count() == 2
    assert Challenge.objects.filter(processing=True, issuer__name="a").count() == 4


def test_single_issuer_may_use_every_slot(order: Order, settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 4
    queue(order, [f"x{i}.example.test" for i in range(10)])
    scheduler.schedule_pass()
    assert Challenge.objects.filter(processing=True).count() == 4


def test_allocate_is_oldest_first_within_the_share() -> None:
    t0 = timezone.now()

    def cands(issuer: int, offsets: list[int]) -> list[Candidate]:
        return [
            Candidate(id=issuer * 100 + o, issuer_id=issuer, created_at=t0 + timedelta(seconds=o))
            for o in offsets
        ]

    queues = {1: cands(1, [0, 1, 2, 3, 4]), 2: cands(2, [10, 11]), 3: cands(3, [5])}
    chosen = allocate(queues, {}, free=6, cap=6)
    # share ceil(6/3)=2: 1 gets 0,1; 3 gets 5; 2 gets 10,11; then leftover to the oldest (1: 2).
    assert [c.id for c in chosen] == [100, 101, 305, 210, 211, 102]
    assert allocate(queues, {}, free=0, cap=6) == []
    assert allocate({}, {}, free=3, cap=6) == []
    # Slots already held count against the share.
    chosen = allocate({1: cands(1, [0, 1]), 2: cands(2, [5])}, {1: 3}, free=2, cap=6)
    assert [c.id for c in chosen] == [205, 100]


def test_format_timeout() -> None:
    assert format_timeout(timedelta(hours=1)) == "1h"
    assert format_timeout(timedelta(minutes=90)) == "1h30m"
    assert format_timeout(timedelta(seconds=45)) == "45s"
    assert format_timeout(timedelta(0)) == "0s"


def test_scheduler_state_counts(order: Order, settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 1
    queue(order, ["q1.example.test", "q2.example.test"])
    scheduler.schedule_pass()
    state = scheduler.scheduler_state()
    assert (state.queued, state.processing, state.cap) == (1, 1, 1)
