"""Issuance webhooks end to end: a certificate issued through the worker → a signed POST
to a real HTTP receiver, retried on failure and on a hanging receiver, never in the way of
issuance."""

from __future__ import annotations

import json
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from issuance.controllers.webhookdeliveries import READ_TIMEOUT, RETRY_AFTER
from issuance.models import Certificate, Event, WebhookDelivery, WebhookDeliveryState
from issuance.notifications import webhook_signing, webhooks
from issuance.worker.loop import Worker
from tests.factories import make_ca_issuer, make_certificate, make_selfsigned_issuer
from tests.webhooks.receiver import receiver

pytestmark = pytest.mark.django_db

SECRET = "a-webhook-secret-of-some-length"
PAYLOAD_KEYS = {
    "certificate",
    "revision",
    "serial",
    "notAfter",
    "notBefore",
    "dnsNames",
    "issuer",
    "event",
}


def run_worker() -> None:
    Worker(threads=1).run_once()


def time_passes(delivery: WebhookDelivery) -> None:
    """The retry is due (instead of waiting for it): the clock moved on."""
    WebhookDelivery.objects.filter(pk=delivery.pk).update(due_at=timezone.now())


def test_an_issued_certificate_is_posted_once_signed_without_key_material(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    issuer = make_selfsigned_issuer("ss")
    with receiver() as rx:
        webhooks.create_webhook("deploy", rx.url, SECRET, actor="admin")
        make_certificate("shop", issuer, dnsNames=["shop.example.test"])
        run_worker()
        run_worker()  # nothing left to send: no second POST
    cert = Certificate.objects.get(name="shop")
    assert cert.revision == 1
    assert len(rx.received) == 1
    got = rx.received[0]
    assert webhook_signing.verify(SECRET.encode(), got.body, got.headers)
    assert not webhook_signing.verify(b"another-secret-entirely", got.body, got.headers)
    body = json.loads(got.body)
    assert set(body) == PAYLOAD_KEYS
    assert body["event"] == "issued"
    assert body["certificate"] == "shop"
    assert body["revision"] == 1
    assert body["issuer"] == "ss"
    assert body["dnsNames"] == ["shop.example.test"]
    assert body["serial"] and body["notAfter"] > body["notBefore"]
    assert b"PRIVATE KEY" not in got.body and b"BEGIN" not in got.body
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == WebhookDeliveryState.DELIVERED
    assert got.headers["X-Issuance-Delivery"] == str(delivery.pk)
    assert [a["status"] for a in delivery.typed_attempts] == [200]
    # The secret is nowhere but encrypted in its row.
    assert SECRET not in caplog.text
    assert not Event.objects.filter(message__contains=SECRET).exists()


def test_a_500_then_a_200_is_retried_and_delivered_once() -> None:
    issuer = make_selfsigned_issuer("ss")
    with receiver("500") as rx:
        webhooks.create_webhook("deploy", rx.url, SECRET, actor="admin")
        make_certificate("shop", issuer)
        before = timezone.now()
        run_worker()
        delivery = WebhookDelivery.objects.get()
        assert delivery.state == WebhookDeliveryState.PENDING
        assert [a["status"] for a in delivery.typed_attempts] == [500]
        assert delivery.typed_attempts[0]["error"] == "HTTP 500"
        assert delivery.due_at is not None
        assert before + RETRY_AFTER[0] <= delivery.due_at <= timezone.now() + RETRY_AFTER[0]
        run_worker()  # not due yet: nothing sent
        assert len(rx.received) == 1
        time_passes(delivery)
        run_worker()
        run_worker()
    assert len(rx.received) == 2
    assert rx.received[0].body == rx.received[1].body
    delivery.refresh_from_db()
    assert delivery.state == WebhookDeliveryState.DELIVERED
    assert [a["status"] for a in delivery.typed_attempts] == [500, 200]


def test_a_hanging_receiver_times_out_and_issuance_goes_on() -> None:
    issuer = make_selfsigned_issuer("ss")
    with receiver("hang") as rx:
        webhooks.create_webhook("deploy", rx.url, SECRET, actor="admin")
        make_certificate("shop", issuer)
        run_worker()
    cert = Certificate.objects.get(name="shop")
    assert cert.revision == 1 and cert.condition_is("Ready")
    delivery = WebhookDelivery.objects.get()
    assert delivery.state == WebhookDeliveryState.PENDING
    (attempt,) = delivery.typed_attempts
    assert attempt["status"] is None and "timed out" in attempt["error"]
    assert attempt["ms"] >= READ_TIMEOUT * 1000 * 0.9
    assert delivery.due_at is not None and delivery.due_at > timezone.now() + timedelta(seconds=20)


def test_retries_end_in_failed_with_every_attempt_kept() -> None:
    issuer = make_selfsigned_issuer("ss")
    with receiver(*["503"] * 10) as rx:
        webhooks.create_webhook("deploy", rx.url, SECRET, actor="admin")
        make_certificate("shop", issuer)
        run_worker()
        delivery = WebhookDelivery.objects.get()
        for _ in RETRY_AFTER:
            time_passes(delivery)
            run_worker()
    delivery.refresh_from_db()
    assert delivery.state == WebhookDeliveryState.FAILED
    assert [a["status"] for a in delivery.typed_attempts] == [503] * (len(RETRY_AFTER) + 1)
    assert len(rx.received) == len(RETRY_AFTER) + 1
    failed = Event.objects.get(reason="DeliveryFailed")
    assert failed.certificate_name == "shop" and failed.type == Event.WARNING


def test_filters_by_issuer_and_certificate_name() -> None:
    ss = make_selfsigned_issuer("ss")
    make_ca_issuer("internal-ca")
    from issuance.models import Issuer

    ca = Issuer.objects.get(name="internal-ca")
    run_worker()  # the CA issuer becomes Ready
    with receiver() as rx_ca, receiver() as rx_web:
        webhooks.create_webhook("ca-only", rx_ca.url, SECRET, actor="a", issuer_glob="internal-*")
        webhooks.create_webhook("web-only", rx_web.url, SECRET, actor="a", certificate_glob="web-*")
        webhooks.create_webhook("off", rx_web.url, SECRET, actor="a", enabled=False)
        make_certificate("api", ca)
        make_certificate("web-front", ss)
        run_worker()
    assert [json.loads(r.body)["certificate"] for r in rx_ca.received] == ["api"]
    assert [json.loads(r.body)["certificate"] for r in rx_web.received] == ["web-front"]
    assert WebhookDelivery.objects.count() == 2


def test_a_test_notice_is_sent_by_the_worker() -> None:
    with receiver() as rx:
        hook = webhooks.create_webhook("deploy", rx.url, SECRET, actor="admin")
        webhooks.queue_test(hook, actor="admin")
        assert rx.received == []  # queued, not sent in the request
        run_worker()
    (got,) = rx.received
    assert webhook_signing.verify(SECRET.encode(), got.body, got.headers)
    assert json.loads(got.body)["event"] == "test"


def test_an_unreachable_receiver_is_an_attempt_whose_error_does_not_repeat_the_url() -> None:
    with receiver() as rx:
        closed = rx.url  # nobody listens there once the receiver is gone
    hook = webhooks.create_webhook("gone", closed + "?token=receiver-token", SECRET, actor="a")
    webhooks.queue_test(hook, actor="a")
    run_worker()
    delivery = WebhookDelivery.objects.get()
    (attempt,) = delivery.typed_attempts
    assert attempt["status"] is None and "Connection refused" in attempt["error"]
    assert "receiver-token" not in attempt["error"] and "/hook" not in attempt["error"]
    assert delivery.state == WebhookDeliveryState.PENDING
