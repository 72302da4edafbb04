"""Per-CA pauses: never shortened by a later, shorter pause; cleared explicitly; shared."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.acme import ratelimit
from issuance.acme.protocol.errors import AcmePausedError
from issuance.models import AcmeServer

pytestmark = pytest.mark.django_db

URL = "https://ca.example.test/directory"


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    ratelimit.forget_cache()


def remaining() -> float:
    until = ratelimit.paused_until(URL)
    assert until is not None
    return (until - timezone.now()).total_seconds()


def test_a_shorter_pause_does_not_shorten_a_longer_one() -> None:
    ratelimit.record_pause(URL, timedelta(seconds=60), "first")
    ratelimit.record_pause(URL, timedelta(seconds=10), "second")
    ratelimit.forget_cache()
    assert 50 < remaining() <= 60
    ratelimit.record_pause(URL, timedelta(seconds=120), "third")
    ratelimit.forget_cache()
    assert 110 < remaining() <= 120
    assert AcmeServer.objects.get(directory_url=URL).pause_reason == "third"


def test_defaults_and_caps() -> None:
    ratelimit.record_pause(URL, None, "no Retry-After")
    assert abs(remaining() - ratelimit.DEFAULT_PAUSE.total_seconds()) < 5
    ratelimit.clear_pause(URL)
    assert ratelimit.paused_until(URL) is None
    ratelimit.record_pause(URL, timedelta(days=30), "absurd")
    assert remaining() <= ratelimit.MAX_PAUSE.total_seconds()


def test_check_raises_with_the_remaining_time_and_expires() -> None:
    ratelimit.check_not_paused(URL)  # no row: fine
    AcmeServer.objects.create(
        directory_url=URL, paused_until=timezone.now() + timedelta(seconds=30), pause_reason="r"
    )
    # Another process recorded it: seen once this process's 1 s view is refreshed.
    ratelimit.forget_cache()
    with pytest.raises(AcmePausedError) as info:
        ratelimit.check_not_paused(URL)
    assert info.value.delay is not None
    assert timedelta(seconds=25) < info.value.delay <= timedelta(seconds=30)
    AcmeServer.objects.filter(directory_url=URL).update(
        paused_until=timezone.now() - timedelta(seconds=1)
    )
    ratelimit.forget_cache()
    ratelimit.check_not_paused(URL)  # over: no error
