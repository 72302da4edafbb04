"""The Notifications page: every role reads it, only admins change channels and rules; the
channel URL is never rendered after saving."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from issuance.models import (
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)

pytestmark = pytest.mark.django_db
URL = "json://hooks.example.com/secret-path-token"


def add_channel(client: Client, **fields: object) -> int:
    data = {"name": "ops", "url": URL, "rate_limit_per_hour": 20, "digest_hour": ""}
    data.update(fields)
    return client.post("/notifications/channels/new/", data).status_code


@pytest.mark.parametrize("role", ["viewer", "operator", "approver"])
def test_readers_see_the_page_but_cannot_change_it(
    client_for: Callable[[str | None], Client], role: str
) -> None:
    NotificationChannel.objects.create(name="ops", url_ciphertext="x", url_hint="json://ho***")
    client = client_for(role)
    page = client.get("/notifications/")
    assert page.status_code == 200
    assert b"json://ho***" in page.content
    assert b"new-channel-form" not in page.content
    assert b"Send a test" not in page.content
    assert add_channel(client, name="other") == 403
    assert client.post("/notifications/channels/ops/test/").status_code == 403
    assert client.post("/notifications/channels/ops/delete/").status_code == 403
    assert not Notification.objects.exists()
    assert NotificationChannel.objects.count() == 1


def test_anonymous_goes_to_login(client_for: Callable[[str | None], Client]) -> None:
    response = client_for(None).get("/notifications/")
    assert response.status_code == 302
    assert "/login/" in response["Location"]


def test_admin_adds_a_channel_a_rule_and_sends_a_test(
    client_for: Callable[[str | None], Client],
) -> None:
    admin = client_for("admin")
    bad = admin.post(
        "/notifications/channels/new/",
        {"name": "ops", "url": "nosuch://x", "rate_limit_per_hour": 20},
    )
    assert bad.status_code == 400
    assert b"apprise does not accept" in bad.content
    assert add_channel(admin) == 302
    page = admin.get("/notifications/")
    assert b"secret-path-token" not in page.content
    assert b"json://ho***" in page.content
    rule = admin.post(
        "/notifications/rules/new/",
        {"name": "failures", "channel": "ops", "condition": "issuance_failed", "threshold": ""},
    )
    assert rule.status_code == 302
    assert NotificationRule.objects.get().condition == NotificationCondition.ISSUANCE_FAILED
    assert admin.post("/notifications/channels/ops/test/").status_code == 302
    test = Notification.objects.get()
    assert test.condition == NotificationCondition.TEST
    assert b"Issuance Console: test message" in admin.get("/notifications/").content
    assert admin.post("/notifications/channels/ops/toggle/").status_code == 302
    assert NotificationChannel.objects.get().enabled is False


def test_admin_adds_a_cluster_unreachable_rule_with_resolved_messages(
    client_for: Callable[[str | None], Client],
) -> None:
    admin = client_for("admin")
    assert add_channel(admin) == 302
    page = admin.get("/notifications/")
    assert b'name="notify_resolved"' in page.content
    data = {"name": "outages", "channel": "ops", "condition": "cluster_unreachable"}
    assert (
        admin.post("/notifications/rules/new/", {**data, "notify_resolved": "on"}).status_code
        == 302
    )
    assert admin.post("/notifications/rules/new/", {**data, "name": "quiet"}).status_code == 302
    rules = {r.name: r for r in NotificationRule.objects.all()}
    assert rules["outages"].condition == NotificationCondition.CLUSTER_UNREACHABLE
    assert (rules["outages"].notify_resolved, rules["quiet"].notify_resolved) == (True, False)
    assert (
        admin.get("/notifications/").content.count(b"Cluster unreachable, and when resolved") == 1
    )
    # The former value is no longer offered.
    old = admin.post(
        "/notifications/rules/new/", {**data, "name": "old", "condition": "kube_disconnected"}
    )
    assert old.status_code == 400 and b"kube_disconnected is not one of" in old.content


def test_dashboard_card_counts_failed_deliveries_and_shows_the_latest_error(
    client_for: Callable[[str | None], Client],
) -> None:
    channel = NotificationChannel.objects.create(name="ops", url_ciphertext="x", url_hint="h")
    viewer = client_for("viewer")
    empty = viewer.get("/partials/dashboard/notifications/")
    assert b"Every notification was delivered." in empty.content
    now = timezone.now()
    for i, state in enumerate(["retrying", "failed", "sent"]):
        Notification.objects.create(
            channel=channel,
            condition="issuance_failed",
            subject=f"Certificate/c{i}",
            instance="1",
            title=f"Issuance failed: c{i}",
            body="b",
            state=state,
            last_error=f"HTTP 50{i} error" if state != "sent" else "",
            attempted_at=now - timedelta(minutes=10 - i),
        )
    card = viewer.get("/partials/dashboard/notifications/").content.decode()
    assert '<strong id="notify-failures">2</strong>' in card
    assert "HTTP 501 error" in card  # the latest failure
    assert "Issuance failed: c1" in card
    assert 'id="dash-notifications"' in viewer.get("/").content.decode()


def test_page_queries_do_not_grow_with_deliveries(
    client_for: Callable[[str | None], Client],
    django_assert_max_num_queries: Any,
) -> None:
    channel = NotificationChannel.objects.create(name="ops", url_ciphertext="x", url_hint="h")
    NotificationRule.objects.create(name="r", channel=channel, condition="expiring")
    admin = client_for("admin")
    admin.get("/notifications/")
    Notification.objects.bulk_create(
        Notification(
            channel=channel,
            condition="expiring",
            subject=f"Certificate/c{i}",
            instance="1",
            title="t",
            body="b",
        )
        for i in range(40)
    )
    with django_assert_max_num_queries(12):
        assert admin.get("/notifications/").status_code == 200


def test_admin_edits_a_channel_keeping_the_url_unless_given(
    client_for: Callable[[str | None], Client],
) -> None:
    admin = client_for("admin")
    assert add_channel(admin) == 302
    form = admin.get("/notifications/channels/ops/edit/")
    assert form.status_code == 200
    assert b"secret-path-token" not in form.content
    saved = admin.post(
        "/notifications/channels/ops/edit/",
        {"url": "", "secret": "", "rate_limit_per_hour": 7, "digest_hour": 6},
    )
    assert saved.status_code == 302
    channel = NotificationChannel.objects.get()
    assert (channel.url, channel.rate_limit_per_hour, channel.digest_hour) == (URL, 7, 6)
    bad = admin.post(
        "/notifications/channels/ops/edit/",
        {"url": "nosuch://x", "rate_limit_per_hour": 7, "digest_hour": ""},
    )
    assert bad.status_code == 400
    assert NotificationChannel.objects.get().url == URL
    assert client_for("operator").get("/notifications/channels/ops/edit/").status_code == 403
    assert (
        client_for("operator")
        .post("/notifications/channels/ops/edit/", {"rate_limit_per_hour": 1})
        .status_code
        == 403
    )
