"""/api/v1/notification-channels/: admin writes, everyone with a role reads a masked list;
the URL and secret never come back, nor reach the timeline or the logs."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.models import Event, Notification, NotificationChannel, NotificationCondition

pytestmark = pytest.mark.django_db
URL = "/api/v1/notification-channels/"
SECRET_URL = "mailtos://alice:hunter2-password@smtp.example.com?to=ops@example.com"

Clients = Callable[[User | None], APIClient]


def test_admin_creates_and_nobody_sees_the_url(
    role_users: dict[str, User], api_client_for: Clients, caplog: pytest.LogCaptureFixture
) -> None:
    admin = api_client_for(role_users["admin"])
    with caplog.at_level(logging.DEBUG):
        created = admin.post(
            URL, {"name": "ops-mail", "url": SECRET_URL, "rateLimitPerHour": 5}, format="json"
        )
    assert created.status_code == 201, created.content
    assert created.json()["target"] == "mailtos://sm***"
    listing = api_client_for(role_users["viewer"]).get(URL)
    assert listing.status_code == 200
    row = listing.json()["results"][0] if "results" in listing.json() else listing.json()[0]
    assert row["rateLimitPerHour"] == 5
    stored = NotificationChannel.objects.get()
    assert stored.url == SECRET_URL
    for text in (
        created.content.decode(),
        listing.content.decode(),
        caplog.text,
        stored.url_ciphertext,
        " ".join(Event.objects.values_list("message", flat=True)),
    ):
        assert "hunter2" not in text
        assert "alice" not in text


def test_roles(role_users: dict[str, User], api_client_for: Clients) -> None:
    for role in ("viewer", "operator", "approver"):
        client = api_client_for(role_users[role])
        assert client.post(URL, {"name": "x", "url": "json://h"}, format="json").status_code == 403
        assert client.get(URL).status_code == 200
    assert api_client_for(role_users["nobody"]).get(URL).status_code == 403
    assert api_client_for(None).get(URL).status_code in (401, 403)
    admin = api_client_for(role_users["admin"])
    assert admin.post(URL, {"name": "x", "url": "json://h"}, format="json").status_code == 201
    operator = api_client_for(role_users["operator"])
    assert operator.post(URL + "x/test/").status_code == 403
    assert operator.delete(URL + "x/").status_code == 403
    assert admin.post(URL + "x/test/").status_code == 202
    queued = Notification.objects.get()
    assert queued.condition == NotificationCondition.TEST
    assert admin.patch(URL + "x/", {"enabled": False}, format="json").json()["enabled"] is False
    assert admin.delete(URL + "x/").status_code == 204
    assert not NotificationChannel.objects.exists()


def test_a_bad_url_names_the_field(role_users: dict[str, User], api_client_for: Clients) -> None:
    admin = api_client_for(role_users["admin"])
    bad = admin.post(URL, {"name": "x", "url": "nosuchscheme://secret-token"}, format="json")
    assert bad.status_code == 400
    assert list(bad.json()) == ["url"]
    assert "secret-token" not in bad.content.decode()
    unsigned = admin.post(URL, {"name": "y", "url": "webhook+https://h.example/p"}, format="json")
    assert unsigned.status_code == 400
    assert list(unsigned.json()) == ["secret"]
    signed = admin.post(
        URL,
        {"name": "y", "url": "webhook+https://h.example/p", "secret": "k" * 16},
        format="json",
    )
    assert signed.status_code == 201
    assert signed.json()["signed"] is True
    assert "secret" not in signed.json()
