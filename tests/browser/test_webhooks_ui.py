"""The Webhooks page in a real Chromium against the real app (web + worker): an admin
creates a webhook, sends a test, and sees the worker's delivery to a real receiver."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import IssuanceWebhook
from issuance.notifications import webhook_signing
from tests.browser.a11y import check_page
from tests.browser.pages import csrf_token, login
from tests.webhooks.receiver import receiver

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]


def test_admin_creates_a_webhook_sends_a_test_and_sees_it_delivered(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    with receiver() as rx:
        page = new_page()
        login(page, "admin")
        page.get_by_role("link", name="Webhooks").click()
        page.wait_for_url("**/webhooks/")
        check_page(page, "webhooks-empty")
        page.fill("#new-webhook-form input[name=name]", "deploy")
        page.fill("#new-webhook-form input[name=url]", rx.url)
        page.fill("#new-webhook-form input[name=certificate_glob]", "web-*")
        page.click("#new-webhook-form button[type=submit]")
        secret = page.locator("#webhook-secret").inner_text().strip()
        assert len(secret) >= 32
        assert page.locator("tr[data-webhook=deploy]").is_visible()
        check_page(page, "webhooks-created")
        page.locator("tr[data-webhook=deploy] button", has_text="Send a test").click()
        page.wait_for_url("**/webhooks/")
        assert secret not in page.content()  # shown once
        # The worker inside `serve` sends it; the page shows the result on a reload.
        delivered = page.locator("#delivery-table .badge-ok")
        for _ in range(40):
            if delivered.count():
                break
            page.wait_for_timeout(250)
            page.reload()
        assert delivered.count() == 1
        assert "HTTP 200" in page.locator("#delivery-table").inner_text()
        check_page(page, "webhooks-delivered")
    (got,) = rx.received
    assert webhook_signing.verify(secret.encode(), got.body, got.headers)
    assert json.loads(got.body)["event"] == "test"


def test_viewer_sees_no_webhooks_link_and_cannot_create(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    viewer = new_page()
    login(viewer, "viewer")
    assert viewer.get_by_role("link", name="Webhooks").count() == 0
    crafted = viewer.request.post(
        "/webhooks/new/",
        form={
            "csrfmiddlewaretoken": csrf_token(viewer),
            "name": "mallory",
            "url": "https://mallory.example.test/",
        },
    )
    assert crafted.status == 403
    assert viewer.goto("/webhooks/").status == 403
    assert not IssuanceWebhook.objects.exists()
