"""Notifications delivered to real receivers: e-mail through apprise's mailto:// into an
aiosmtpd server, and the signed JSON webhook into an http.server receiver."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from issuance.models import (
    Certificate,
    DeliveryState,
    Event,
    Issuer,
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)
from issuance.notifications import deliver, send, step, webhook_signing
from issuance.observability import events
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.notifications.receivers import http_receiver, smtp_server

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 24, 3, 0, tzinfo=UTC)
SECRET = "s3cret-webhook-key"


def channel(url: str, **fields: object) -> NotificationChannel:
    ch = NotificationChannel(name=fields.pop("name", "ops"), **fields)  # type: ignore[misc]
    ch.url = url
    ch.secret = SECRET if url.startswith("webhook+") else ""
    ch.save()
    return ch


def failing(name: str = "web", attempts: int = 1, at: datetime = NOW) -> Certificate:
    cert = Certificate.objects.filter(name=name).first()
    if cert is None:
        issuer = Issuer.objects.filter(name="selfsigned").first() or make_selfsigned_issuer()
        cert = make_certificate(name, issuer)
    cert.failed_issuance_attempts = attempts
    cert.last_failure_time = at
    cert.next_retry_time = at + timedelta(hours=1)
    cert.set_condition(
        "Issuing", "False", "Failed", "urn:ietf:params:acme:error:rejectedIdentifier"
    )
    cert.save()
    return cert


def rule(ch: NotificationChannel, condition: str = NotificationCondition.ISSUANCE_FAILED) -> None:
    NotificationRule.objects.create(name=f"r-{condition}", channel=ch, condition=condition)


def test_email_through_apprise_reaches_a_real_smtp_server() -> None:
    with smtp_server() as (box, port):
        ch = channel(
            f"mailto://127.0.0.1:{port}?smtp=127.0.0.1&mode=insecure"
            "&from=console@example.com&to=ops@example.com"
        )
        rule(ch)
        failing()
        assert deliver.detect_pass(NOW) == 1
        assert deliver.deliver_due(NOW) == 1
        deadline = time.monotonic() + 5
        while not box.messages and time.monotonic() < deadline:
            time.sleep(0.05)
    assert len(box.messages) == 1
    mail = box.messages[0]
    assert mail["Subject"] == "Issuance failed: web"
    text = mail.get_body(preferencelist=("plain",))
    assert text is not None
    assert "rejectedIdentifier" in text.get_content()
    assert "ops@example.com" in mail["To"]
    assert Notification.objects.get().state == DeliveryState.SENT


def test_signed_webhook_verified_by_the_receiver() -> None:
    with http_receiver() as receiver:
        ch = channel("webhook+" + receiver.url)
        rule(ch, NotificationCondition.BACKOFF)
        failing(attempts=2)
        deliver.detect_pass(NOW)
        deliver.deliver_due(NOW)
    assert len(receiver.posts) == 1
    post = receiver.posts[0]
    assert webhook_signing.verify(SECRET.encode(), post.body, post.headers)
    assert not webhook_signing.verify(b"another key", post.body, post.headers)
    assert b"next retry at 2026-11-24T04:00:00+00:00" in post.body
    assert b'"condition":"backoff"' in post.body
    assert json.loads(post.body)["id"] == Notification.objects.get().pk  # receivers dedup on it


def test_one_message_per_condition_until_it_changes() -> None:
    with http_receiver() as receiver:
        ch = channel("webhook+" + receiver.url)
        rule(ch)
        failing(attempts=1)
        for minute in range(5):  # five worker passes, the same failure
            at = NOW + timedelta(minutes=minute)
            deliver.detect_pass(at)
            deliver.deliver_due(at)
        assert len(receiver.posts) == 1
        failing(attempts=2, at=NOW + timedelta(minutes=10))  # a new attempt failed
        for minute in range(10, 13):
            at = NOW + timedelta(minutes=minute)
            deliver.detect_pass(at)
            deliver.deliver_due(at)
    assert len(receiver.posts) == 2
    assert b"attempt 2" in receiver.posts[1].body


def test_rate_limit_defers_the_excess() -> None:
    with http_receiver() as receiver:
        ch = channel("webhook+" + receiver.url, rate_limit_per_hour=3)
        rule(ch)
        for i in range(5):
            failing(f"web{i}")
        assert deliver.detect_pass(NOW) == 5
        deliver.deliver_due(NOW)
        deliver.deliver_due(NOW + timedelta(minutes=30))
        assert len(receiver.posts) == 3
        waiting = Notification.objects.filter(state=DeliveryState.PENDING)
        assert waiting.count() == 2
        assert {n.next_attempt_at for n in waiting} == {NOW + timedelta(hours=1)}
        deliver.deliver_due(NOW + timedelta(hours=1, seconds=1))
    assert len(receiver.posts) == 5


def test_daily_digest_sends_one_summary_at_the_hour() -> None:
    with http_receiver() as receiver:
        ch = channel("webhook+" + receiver.url, digest_hour=7)
        rule(ch)
        for i in range(3):
            failing(f"web{i}")
        deliver.detect_pass(NOW)
        deliver.deliver_due(NOW)
        deliver.deliver_due(NOW + timedelta(hours=3))  # 06:00, before the hour
        assert receiver.posts == []
        seven = NOW + timedelta(hours=4)
        deliver.deliver_due(seven)
        deliver.deliver_due(seven + timedelta(minutes=5))
        failing("late")
        deliver.detect_pass(seven + timedelta(hours=1))
        deliver.deliver_due(seven + timedelta(hours=2))  # the same day: held for tomorrow
        assert len(receiver.posts) == 1
        deliver.deliver_due(seven + timedelta(days=1))
    assert len(receiver.posts) == 2
    first = receiver.posts[0].body.decode()
    assert "3 notification(s) on 2026-11-24" in first
    assert all(f"web{i}" in first for i in range(3))
    assert "late" in receiver.posts[1].body.decode()


def test_retries_with_backoff_after_500_then_gives_up() -> None:
    with http_receiver(status=500) as receiver:
        ch = channel("webhook+" + receiver.url)
        rule(ch)
        failing()
        deliver.detect_pass(NOW)
        at = NOW
        expected = [timedelta(minutes=1), timedelta(minutes=5), timedelta(minutes=30)]
        for delay in expected:
            deliver.deliver_due(at)
            row = Notification.objects.get()
            assert row.state == DeliveryState.RETRYING
            assert row.next_attempt_at == at + delay
            assert row.last_error == "HTTP 500 Internal Server Error"
            deliver.deliver_due(at + delay - timedelta(seconds=1))  # not yet due
            at = at + delay
        assert len(receiver.posts) == 3
        deliver.deliver_due(at)
        assert Notification.objects.get().next_attempt_at == at + timedelta(hours=2)
        receiver.status = 200
        deliver.deliver_due(at + timedelta(hours=2))
    row = Notification.objects.get()
    assert row.state == DeliveryState.SENT
    assert row.attempts == 5


def test_gives_up_after_the_last_retry() -> None:
    with http_receiver(status=500) as receiver:
        ch = channel("webhook+" + receiver.url)
        rule(ch)
        failing()
        deliver.detect_pass(NOW)
        at = NOW
        for delay in [*deliver.RETRY_DELAYS, timedelta(0)]:
            deliver.deliver_due(at)
            at += delay
    row = Notification.objects.get()
    assert row.state == DeliveryState.FAILED
    assert row.attempts == 5
    assert len(receiver.posts) == 5


@pytest.mark.django_db(transaction=True)
def test_a_hanging_receiver_never_stalls_the_worker_step(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(step._state, "detected", 0.0)
    monkeypatch.setitem(step._state, "delivered", 0.0)
    with http_receiver(hang=True) as receiver:
        ch = channel("webhook+" + receiver.url)
        rule(ch)
        failing(at=timezone.now())
        started = time.monotonic()
        assert step.step() is True  # found the failure, handed delivery to its thread
        assert time.monotonic() - started < 2
        [sender] = step._sender
        sender.join(send.SEND_TIMEOUT + 2)  # each send is bounded
        assert not sender.is_alive()
    row = Notification.objects.get()
    assert row.state == DeliveryState.RETRYING
    assert "timed out" in row.last_error or "no answer" in row.last_error


def test_a_row_is_claimed_by_one_sender_only() -> None:
    ch = channel("json://127.0.0.1:9/never")
    rule(ch)
    failing()
    deliver.detect_pass(NOW)
    first = Notification.objects.get()
    second = Notification.objects.get()  # another worker process read it too
    assert deliver._claim(first, NOW) is True
    assert deliver._claim(second, NOW) is False
    assert Notification.objects.get().next_attempt_at == NOW + deliver.CLAIM_FOR


def test_apprise_failure_reason_is_kept_without_the_url() -> None:
    with http_receiver(status=500) as receiver:
        ch = channel(f"json://127.0.0.1:{receiver.port}/secret-path-token")
        rule(ch)
        failing()
        deliver.detect_pass(NOW)
        deliver.deliver_due(NOW)
    assert len(receiver.posts) == 1
    row = Notification.objects.get()
    assert row.state == DeliveryState.RETRYING
    assert "500" in row.last_error
    assert "secret-path-token" not in row.last_error


def test_a_warning_in_the_timeline_brings_detection_forward(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(step, "_work_waiting", lambda: False)  # no delivery thread here
    monkeypatch.setitem(step._state, "detected", time.monotonic())  # detected just now
    monkeypatch.setitem(step._state, "delivered", 0.0)
    monkeypatch.setitem(step._seen, "detected", timezone.now())
    ch = channel("json://127.0.0.1:9/never")
    rule(ch)
    failing(at=timezone.now())
    assert step.step() is False  # no warning since: waits for the 30 s pass
    assert not Notification.objects.exists()
    monkeypatch.setitem(step._state, "delivered", 0.0)
    events.record("Certificate", "web", "Failed", "boom", type_=Event.WARNING)
    assert step.step() is True
    assert Notification.objects.count() == 1
