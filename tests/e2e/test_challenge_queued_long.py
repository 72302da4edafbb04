"""A challenge that waited in the scheduler's queue for over a minute (Pebble, HTTP-01).

Such a challenge is synced with the CA before it is presented (the CA may have moved on).
When the CA still says "pending", it is presented in the same pass: syncing again on every
pass, as the row still looks long queued, would never present it (under load, with the
default key, the whole queue stalled that way).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.utils import timezone
from pytest_django import Settings

from issuance.controllers.challenges import SYNC_IF_QUEUED_FOR
from issuance.models import Certificate, Challenge, Event
from issuance.observability.metrics import REGISTRY
from tests.e2e.conftest import AcmeStack, Drive
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def acme_calls(action: str) -> float:
    labels = {"action": action, "result": "ok"}
    return REGISTRY.get_sample_value("issuance_acme_requests_total", labels) or 0.0


def test_long_queued_pending_challenge_is_synced_once_then_presented(
    acme_stack: Callable[..., AcmeStack], drive: Drive, settings: Settings
) -> None:
    stack = acme_stack()
    settings.MAX_CONCURRENT_CHALLENGES = 0  # nothing is scheduled yet
    issuer = stack.make_issuer()
    make_certificate("late", issuer, dnsNames=["late.example.test"])  # the default key
    drive(lambda: Challenge.objects.filter(dns_name="late.example.test").exists(), 60)
    chal = Challenge.objects.get(dns_name="late.example.test")
    assert not chal.processing and chal.state == "pending"
    queued_since = timezone.now() - SYNC_IF_QUEUED_FOR - timedelta(seconds=1)
    Challenge.objects.filter(pk=chal.pk).update(created_at=queued_since)
    before = acme_calls("get_challenge")

    settings.MAX_CONCURRENT_CHALLENGES = 60
    drive(lambda: Certificate.objects.get(name="late").condition_is("Ready"), timeout=90)

    chal.refresh_from_db()
    assert chal.state == "valid", chal.reason
    assert acme_calls("get_challenge") == before + 1  # synced once, not on every pass
    assert Event.objects.filter(name=chal.name, reason="Presented").count() == 1
    assert Event.objects.filter(name=chal.name, reason="Accepted").count() == 1
