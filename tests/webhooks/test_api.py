"""/api/v1/issuance-webhooks/ and /api/v1/issuance-webhook-deliveries/: admin only, the
secret write-only, test notices queued for the worker."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pytest_django import Settings
from rest_framework.test import APIClient

from issuance.models import Event, IssuanceWebhook, WebhookDelivery
from issuance.notifications import webhooks

SECRET = "a-webhook-secret-of-some-length"
BODY = {
    "name": "deploy",
    "url": "https://deploy.example.test/hook?token=abc",
    "secret": SECRET,
    "issuerFilter": "internal-*",
}

Clients = Callable[[User | None], APIClient]


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def test_admin_creates_and_the_secret_is_never_answered(
    role_users: dict[str, User], api_client_for: Clients
) -> None:
    client = api_client_for(role_users["admin"])
    created = client.post("/api/v1/issuance-webhooks/", BODY, format="json")
    assert created.status_code == 201, created.content
    assert created.json() == {
        "name": "deploy",
        "url": BODY["url"],
        "enabled": True,
        "issuerFilter": "internal-*",
        "certificateFilter": "",
        "createdAt": created.json()["createdAt"],
        "createdBy": "admin",
    }
    hook = IssuanceWebhook.objects.get()
    assert hook.secret == SECRET.encode()
    assert SECRET not in hook.secret_ciphertext
    again = client.post("/api/v1/issuance-webhooks/", BODY, format="json")
    assert again.status_code == 409
    tested = client.post("/api/v1/issuance-webhooks/deploy/test/")
    assert tested.status_code == 202
    assert tested.json()["state"] == "Pending" and tested.json()["event"] == "test"
    outputs = [
        created.content,
        again.content,
        tested.content,
        client.get("/api/v1/issuance-webhooks/").content,
        client.get("/api/v1/issuance-webhooks/deploy/").content,
        client.get("/api/v1/issuance-webhook-deliveries/").content,
        client.get("/api/schema/").content,
    ]
    assert not [o for o in outputs if SECRET.encode() in o]
    assert not Event.objects.filter(message__contains=SECRET).exists()
    assert client.delete("/api/v1/issuance-webhooks/deploy/").status_code == 204
    assert not IssuanceWebhook.objects.exists() and not WebhookDelivery.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"url": "ftp://files.example.test/"}, "url"),
        ({"url": "not a url"}, "url"),
        ({"secret": "short"}, "secret"),
        ({"name": "Not_A_Name"}, "name"),
        ({"enabled": "yes"}, "enabled"),
        ({"extra": 1}, "extra"),
    ],
)
def test_bad_bodies_are_400_naming_the_field(
    change: dict[str, object], field: str, role_users: dict[str, User], api_client_for: Clients
) -> None:
    client = api_client_for(role_users["admin"])
    answer = client.post("/api/v1/issuance-webhooks/", {**BODY, **change}, format="json")
    assert answer.status_code == 400
    assert field in answer.json()
    assert SECRET not in json.dumps(answer.json())
    assert not IssuanceWebhook.objects.exists()


def test_deliveries_list_shows_attempts_in_a_fixed_number_of_queries(
    role_users: dict[str, User], api_client_for: Clients
) -> None:
    client = api_client_for(role_users["admin"])
    for index in range(3):
        hook = webhooks.create_webhook(f"h{index}", "https://a.example.test/", SECRET, actor="x")
        delivery = webhooks.queue_test(hook, actor="x")
        delivery.attempts = [
            {"at": "2026-01-01T00:00:00+00:00", "status": 500, "error": "HTTP 500", "ms": 3}
        ]
        delivery.save()
    with CaptureQueriesContext(connection) as queries:
        answer = client.get("/api/v1/issuance-webhook-deliveries/?webhook=h1")
    assert answer.status_code == 200
    (row,) = answer.json()["results"]
    assert row["webhook"] == "h1" and row["attempts"][0]["status"] == 500
    assert row["nextAttemptAt"] is not None
    assert len(queries) <= 4  # auth aside: count and page, the webhook joined
