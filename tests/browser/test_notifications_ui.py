"""The Notifications page in a real Chromium against `manage.py serve` (web + worker): an admin
adds a json:// channel pointing at a receiver started here, presses "Send a test", and the
worker delivers it; the page is held to check_page."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import DeliveryState, Notification
from tests.browser.a11y import check_page
from tests.browser.pages import login
from tests.notifications.receivers import http_receiver

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]


def test_admin_adds_a_channel_and_sends_a_test(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    with http_receiver() as receiver:
        page = new_page()
        login(page, "admin")
        page.get_by_role("link", name="Notifications").click()
        page.wait_for_url("**/notifications/")
        page.fill("#id_name", "ops-hook")
        page.fill("#id_url", f"json://127.0.0.1:{receiver.port}/hook")
        page.click("#new-channel-form button[type=submit]")
        page.wait_for_url("**/notifications/")
        row = page.locator("tr[data-channel=ops-hook]")
        assert "json://12***" in row.inner_text()
        assert str(receiver.port) not in page.content()
        row.get_by_role("button", name="Send a test").click()
        page.wait_for_url("**/notifications/")
        deadline = time.monotonic() + 30
        while not receiver.posts and time.monotonic() < deadline:
            time.sleep(0.1)
        assert receiver.posts, "the worker did not deliver the test message"
        assert json.loads(receiver.posts[0].body)["title"] == "Issuance Console: test message"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if Notification.objects.filter(state=DeliveryState.SENT).exists():
                break
            time.sleep(0.1)
        page.reload()
        assert page.locator("#delivery-table tr[data-state=sent]").count() == 1
        check_page(page, "notifications")
        row.get_by_role("link", name="Edit").click()
        page.wait_for_url("**/notifications/channels/ops-hook/edit/")
        check_page(page, "notification-channel-edit")
        page.fill("#id_rate_limit_per_hour", "5")
        page.click("#edit-channel-form button[type=submit]")
        page.wait_for_url("**/notifications/")
        assert "5/h" in page.locator("tr[data-channel=ops-hook]").inner_text()

    viewer = new_page()
    login(viewer, "viewer")
    viewer.goto("/notifications/")
    assert viewer.locator("#new-channel-form").count() == 0
    assert viewer.get_by_role("button", name="Send a test").count() == 0
    check_page(viewer, "notifications-viewer")
