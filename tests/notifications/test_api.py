"""/api/v1/notification-channels/: admin writes, everyone with a role reads a masked list;
the URL and secret never come back, nor reach the timeline or the logs.
/api/v1/notification-rules/: the page's rules, with its checks and roles."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from issuance.models import (
    Event,
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)

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


def test_a_channel_url_and_secret_are_checked_as_the_schema_says(
    role_users: dict[str, User], api_client_for: Clients
) -> None:
    """The schema's url pattern (apprise's schemes, no spaces) and secret limits are what the
    API checks: each of these is refused naming the field, and nothing is stored."""
    admin = api_client_for(role_users["admin"])
    for url in ("0", " json://hooks.example.test", "JSON://hooks.example.test", "json://a b"):
        refused = admin.post(URL, {"name": "x", "url": url}, format="json")
        assert refused.status_code == 400, url
        assert list(refused.json()) == ["url"], refused.json()
    short = admin.post(URL, {"name": "x", "url": "json://h", "secret": "k" * 15}, format="json")
    assert list(short.json()) == ["secret"]
    tab = admin.post(
        URL, {"name": "x", "url": "json://h", "secret": "k" * 16 + "\t"}, format="json"
    )
    assert list(tab.json()) == ["secret"]
    assert not NotificationChannel.objects.exists()
    native = admin.post(
        URL,
        {"name": "x", "url": "https://discord.com/api/webhooks/123456789/abcdefghijkl"},
        format="json",
    )
    assert native.status_code == 201, native.content  # a service's own https:// address


RULES = "/api/v1/notification-rules/"


@pytest.fixture
def channels() -> list[NotificationChannel]:
    made = []
    for name in ("ops-mail", "chat"):
        channel = NotificationChannel(name=name)
        channel.url = f"json://{name}.example.test/hook"
        channel.save()
        made.append(channel)
    return made


def test_admin_creates_changes_and_deletes_a_rule(
    role_users: dict[str, User], api_client_for: Clients, channels: list[NotificationChannel]
) -> None:
    admin = api_client_for(role_users["admin"])
    created = admin.post(
        RULES,
        {
            "name": "web-expiring",
            "channel": "ops-mail",
            "condition": "expiring",
            "threshold": 10,
            "namePattern": "web-*",
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert {k: v for k, v in body.items() if k != "createdAt"} == {
        "name": "web-expiring",
        "channel": "ops-mail",
        "condition": "expiring",
        "threshold": 10,
        "namePattern": "web-*",
        "issuerPattern": "",
        "enabled": True,
        "notifyResolved": False,
    }
    rule = NotificationRule.objects.get()
    assert (rule.channel, rule.threshold, rule.name_pattern) == (channels[0], 10, "web-*")
    assert admin.get(RULES + "web-expiring/").json() == body

    patched = admin.patch(
        RULES + "web-expiring/", {"channel": "chat", "enabled": False}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert (patched.json()["channel"], patched.json()["enabled"]) == ("chat", False)
    assert patched.json()["threshold"] == 10  # PATCH keeps what it does not name

    put = {"channel": "chat", "condition": "backoff"}
    replaced = admin.put(RULES + "web-expiring/", put, format="json")
    assert replaced.status_code == 200, replaced.content
    # PUT sets every field: the ones left out are back to their defaults
    assert (replaced.json()["threshold"], replaced.json()["namePattern"]) == (0, "")
    assert replaced.json()["enabled"] is True
    before = Event.objects.count()
    assert admin.put(RULES + "web-expiring/", put, format="json").status_code == 200
    assert Event.objects.count() == before  # the same state again is no change

    assert admin.delete(RULES + "web-expiring/").status_code == 204
    assert not NotificationRule.objects.exists()
    assert admin.get(RULES + "web-expiring/").status_code == 404
    timeline = list(
        Event.objects.filter(kind="NotificationRule").order_by("id").values_list("reason", "actor")
    )
    assert timeline == [
        ("Created", "admin"),
        ("Updated", "admin"),
        ("Updated", "admin"),
        ("Deleted", "admin"),
    ]


def test_rule_roles(
    role_users: dict[str, User], api_client_for: Clients, channels: list[NotificationChannel]
) -> None:
    """As on the page: every role reads, only admin changes."""
    NotificationRule.objects.create(name="r", channel=channels[0], condition="backoff")
    body = {"name": "x", "channel": "chat", "condition": "backoff"}
    for role in ("viewer", "operator", "approver"):
        client = api_client_for(role_users[role])
        assert client.get(RULES).status_code == 200
        assert client.get(RULES + "r/").status_code == 200
        assert client.post(RULES, body, format="json").status_code == 403
        assert client.put(RULES + "r/", body, format="json").status_code == 403
        assert client.patch(RULES + "r/", {"enabled": False}, format="json").status_code == 403
        assert client.delete(RULES + "r/").status_code == 403
    assert api_client_for(role_users["nobody"]).get(RULES).status_code == 403
    assert api_client_for(None).get(RULES).status_code in (401, 403)
    rule = NotificationRule.objects.get()
    assert (rule.enabled, rule.condition, NotificationRule.objects.count()) == (True, "backoff", 1)
    assert not Event.objects.filter(kind="NotificationRule").exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"channel": "no-such-channel"}, "channel"),
        ({"channel": "Not A Name"}, "channel"),
        ({"condition": "test"}, "condition"),
        ({"condition": "digest"}, "condition"),
        ({"threshold": -1}, "threshold"),
        ({"threshold": 100001}, "threshold"),
        ({"threshold": "5"}, "threshold"),
        ({"threshold": 5.0}, "threshold"),
        ({"namePattern": "Web-*"}, "namePattern"),
        ({"issuerPattern": "ca two"}, "issuerPattern"),
        ({"namePattern": "w" * 254}, "namePattern"),
        ({"enabled": "yes"}, "enabled"),
        ({"notify": True}, "notify"),
        ({"name": "Bad Name"}, "name"),
    ],
)
def test_a_bad_rule_names_the_field_and_stores_nothing(
    role_users: dict[str, User],
    api_client_for: Clients,
    channels: list[NotificationChannel],
    change: dict[str, object],
    field: str,
) -> None:
    admin = api_client_for(role_users["admin"])
    body = {"name": "r", "channel": "ops-mail", "condition": "backoff", **change}
    refused = admin.post(RULES, body, format="json")
    assert refused.status_code == 400, refused.content
    assert list(refused.json()) == [field], refused.json()
    assert not NotificationRule.objects.exists()
    assert not Event.objects.filter(kind="NotificationRule").exists()
    if field == "name":
        return
    NotificationRule.objects.create(name="r", channel=channels[0], condition="backoff")
    change.pop("name", None)
    patched = admin.patch(RULES + "r/", change, format="json")
    assert patched.status_code == 400, patched.content
    assert list(patched.json()) == [field]
    rule = NotificationRule.objects.get()
    assert (rule.channel, rule.condition, rule.threshold) == (channels[0], "backoff", 0)


def test_required_fields_and_a_name_taken(
    role_users: dict[str, User], api_client_for: Clients, channels: list[NotificationChannel]
) -> None:
    admin = api_client_for(role_users["admin"])
    missing = admin.post(RULES, {"name": "r"}, format="json")
    assert missing.status_code == 400
    assert sorted(missing.json()) == ["channel", "condition"]
    put_missing = {"channel": "chat"}
    body = {"name": "r", "channel": "chat", "condition": "backoff"}
    assert admin.post(RULES, body, format="json").status_code == 201
    assert admin.post(RULES, body, format="json").status_code == 409
    refused = admin.put(RULES + "r/", put_missing, format="json")
    assert list(refused.json()) == ["condition"]
    assert admin.put(RULES + "nope/", body, format="json").status_code == 404
    assert NotificationRule.objects.count() == 1


def test_the_page_and_the_api_refuse_the_same_rule_with_the_same_message(
    role_users: dict[str, User], api_client_for: Clients, channels: list[NotificationChannel]
) -> None:
    """One check for both (issuance.notifications.rules), not two copies that drift."""
    from django.test import Client

    from issuance.notifications import rules

    page = Client()
    page.force_login(role_users["admin"])
    answer = page.post(
        "/notifications/rules/new/",
        {"name": "r", "channel": "ops-mail", "condition": "backoff", "name_pattern": "Web*"},
    )
    assert answer.status_code == 400
    assert answer.context["rule_form"].errors["name_pattern"] == [rules.PATTERN_MESSAGE]
    api = api_client_for(role_users["admin"]).post(
        RULES,
        {"name": "r", "channel": "ops-mail", "condition": "backoff", "namePattern": "Web*"},
        format="json",
    )
    assert api.json() == {"namePattern": [rules.PATTERN_MESSAGE]}
    bad_name = page.post(
        "/notifications/rules/new/",
        {"name": "Not A Name", "channel": "chat", "condition": "backoff"},
    )
    assert bad_name.status_code == 400
    assert "name" in bad_name.context["rule_form"].errors
    assert not NotificationRule.objects.exists()


def test_rule_filters(
    role_users: dict[str, User], api_client_for: Clients, channels: list[NotificationChannel]
) -> None:
    mail, chat = channels
    NotificationRule.objects.create(name="a", channel=mail, condition="backoff")
    NotificationRule.objects.create(name="b", channel=chat, condition="backoff", enabled=False)
    NotificationRule.objects.create(name="c", channel=chat, condition="expiring")
    viewer = api_client_for(role_users["viewer"])

    def names(query: str) -> list[str]:
        response = viewer.get(RULES + query)
        assert response.status_code == 200, response.content
        return [r["name"] for r in response.json()["results"]]

    assert names("") == ["a", "b", "c"]
    assert names("?channel=chat") == ["b", "c"]
    assert names("?condition=backoff") == ["a", "b"]
    assert names("?channel=chat&condition=backoff&enabled=false") == ["b"]
    bad = viewer.get(RULES + "?condition=test")
    assert bad.status_code == 400
    assert list(bad.json()) == ["condition"]


def test_rule_list_queries_do_not_grow_with_rows(
    role_users: dict[str, User],
    api_client_for: Clients,
    channels: list[NotificationChannel],
    django_assert_max_num_queries: Any,
) -> None:
    viewer = api_client_for(role_users["viewer"])
    viewer.get(RULES)  # the user's roles are looked up once and cached on the user

    def add(start: int, stop: int) -> None:
        for i in range(start, stop):
            NotificationRule.objects.create(
                name=f"r-{i}", channel=channels[i % 2], condition="backoff"
            )

    def measure() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as ctx:
            response = viewer.get(RULES + "?limit=100")
        assert response.status_code == 200
        return len(ctx.captured_queries), len(response.json()["results"])

    add(0, 3)
    small_queries, small_rows = measure()
    add(3, 40)
    large_queries, large_rows = measure()
    assert (small_rows, large_rows) == (3, 40)
    assert large_queries == small_queries
    with django_assert_max_num_queries(4):  # the roles, the count, the page (with channels)
        assert viewer.get(RULES + "?limit=100").status_code == 200


def test_the_schema_states_the_rules_constraints() -> None:
    from drf_spectacular.generators import SchemaGenerator

    from issuance.notifications import rules

    schema = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
    components = schema["components"]["schemas"]
    create = components["RuleCreateRequest"]
    assert sorted(create["required"]) == ["channel", "condition", "name"]
    assert create["additionalProperties"] is False
    props = create["properties"]
    enum_ref = props["condition"]["allOf"][0]["$ref"].rsplit("/", 1)[1]
    assert components[enum_ref]["enum"] == list(rules.CONDITIONS)
    assert (props["threshold"]["minimum"], props["threshold"]["maximum"]) == (0, 100000)
    assert props["namePattern"]["oneOf"][0]["pattern"] == "^[a-z0-9.*?\\[\\]!-]+$"
    assert "pattern" in props["channel"]
    assert sorted(components["Rule"]["required"]) == sorted(
        [
            "name",
            "channel",
            "condition",
            "threshold",
            "namePattern",
            "issuerPattern",
            "enabled",
            "notifyResolved",
            "createdAt",
        ]
    )
    operations = schema["paths"]["/api/v1/notification-rules/{name}/"]
    assert set(operations) >= {"get", "put", "patch", "delete"}
    listing = schema["paths"]["/api/v1/notification-rules/"]["get"]["parameters"]
    assert {p["name"] for p in listing} >= {"channel", "condition", "enabled", "limit", "offset"}
    url = components["ChannelCreateRequest"]["properties"]["url"]
    assert url["pattern"].startswith("^(?:") and "mailtos" in url["pattern"]
