"""console.live: topic → group names, and a Redis outage never reaching issuance."""

from __future__ import annotations

import time
from typing import Any

import pytest
from channels.layers import channel_layers
from django.db import transaction

from console.live import LiveSender, group_for
from issuance.models import Certificate
from tests.factories import make_certificate, make_selfsigned_issuer


def test_group_names_are_valid_channel_groups() -> None:
    assert group_for("dashboard") == "live.dashboard"
    assert group_for("certificate:web.example-1") == "live.cert.web.example-1"
    long_name = "a" * 200
    hashed = group_for(f"certificate:{long_name}")
    assert hashed is not None
    assert hashed.startswith("live.certh.")
    assert len(hashed) < 100
    assert hashed != group_for(f"certificate:{'a' * 199}")
    for bad in ("certificate:", "certificate:UPPER", "certificate:a b", "other", "certificate:-x"):
        assert group_for(bad) is None, bad


def test_in_memory_layer_without_a_serving_loop_drops_quietly(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends.clear()
    sender = LiveSender()
    sender("dashboard", {"type": "dashboard.changed"})
    assert (sender.pending, sender.sent, sender.errors) == (0, 0, 0)


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
def test_unreachable_redis_is_logged_and_issuance_goes_on(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # Nothing listens on port 1: every send fails fast with a connection error.
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    channel_layers.backends.clear()
    from console.live import sender

    errors_before = sender.errors
    issuer = make_selfsigned_issuer()
    started = time.monotonic()
    with transaction.atomic():
        make_certificate("offline", issuer)
    assert time.monotonic() - started < 1.0, "the commit waited for the channel layer"
    assert Certificate.objects.filter(name="offline").exists()
    deadline = time.monotonic() + 10
    while sender.errors == errors_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sender.errors > errors_before
    deadline = time.monotonic() + 10
    while sender.pending and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sender.pending == 0
    channel_layers.backends.clear()


def test_backlog_is_bounded(settings: Any) -> None:
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]},
        }
    }
    channel_layers.backends.clear()
    sender = LiveSender()
    sender.MAX_PENDING = 0
    sender("dashboard", {"type": "dashboard.changed"})
    assert sender.dropped == 1
    channel_layers.backends.clear()
