"""Webhooks page (admin): create (a generated secret shown once), send a test, delete."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from issuance.models import Event, IssuanceWebhook, WebhookDelivery

pytestmark = pytest.mark.django_db

FORM = {"name": "deploy", "url": "https://deploy.example.test/hook", "issuer_glob": "ca-*"}


def test_admin_creates_with_a_generated_secret_shown_once(
    client_for: Callable[[str | None], Client],
) -> None:
    admin = client_for("admin")
    response = admin.post("/webhooks/new/", FORM, follow=True)
    assert response.redirect_chain == [("/webhooks/", 302)]
    assert response.status_code == 200
    secret = response.context["secret_text"]
    assert len(secret) >= 32 and secret.encode() in response.content
    hook = IssuanceWebhook.objects.get()
    assert hook.secret == secret.encode() and hook.issuer_glob == "ca-*"
    page = admin.get("/webhooks/")
    assert (
        secret.encode() not in page.content
        and b"deploy.example.test/hook" in page.content.replace(b"<wbr>", b"")
    )
    assert not Event.objects.filter(message__contains=secret).exists()


def test_a_given_secret_is_never_shown_and_bad_input_is_400(
    client_for: Callable[[str | None], Client],
) -> None:
    admin = client_for("admin")
    given = "my-own-secret-of-enough-length"
    response = admin.post("/webhooks/new/", {**FORM, "secret": given}, follow=True)
    assert response.status_code == 200 and given.encode() not in response.content
    assert b"It signs with the secret you gave" in response.content
    assert IssuanceWebhook.objects.get().secret == given.encode()
    bad = admin.post("/webhooks/new/", {**FORM, "name": "other", "url": "ftp://x.example/"})
    assert bad.status_code == 400 and b"http:// or https://" in bad.content
    short_secret = "too-short-123"
    short = admin.post("/webhooks/new/", {**FORM, "name": "third", "secret": short_secret})
    assert short.status_code == 400 and b"16 to 256 characters" in short.content
    assert short_secret.encode() not in short.content  # not echoed back into the form
    assert IssuanceWebhook.objects.count() == 1


def test_send_a_test_queues_it_and_the_page_shows_the_delivery(
    client_for: Callable[[str | None], Client],
) -> None:
    admin = client_for("admin")
    admin.post("/webhooks/new/", FORM)
    answer = admin.post("/webhooks/deploy/test/")
    assert answer.status_code == 302
    delivery = WebhookDelivery.objects.get()
    assert delivery.event == "test" and delivery.state == "Pending"
    delivery.attempts = [
        {"at": "2026-11-24T04:00:00+00:00", "status": 502, "error": "HTTP 502", "ms": 7}
    ]
    delivery.save()
    page = admin.get("/webhooks/").content.decode()
    assert f'data-delivery="{delivery.pk}"' in page and "HTTP 502" in page
    assert admin.post("/webhooks/deploy/delete/").status_code == 302
    assert not IssuanceWebhook.objects.exists() and not WebhookDelivery.objects.exists()
