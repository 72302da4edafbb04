"""The endpoint conditions (served certificate stale, endpoint unreachable, served chain or
hostname mismatch, served certificate expiring): each fires once per episode into a real
signed-webhook receiver, and once more when the episode ends if the rule asks for it; the
rules are offered on the Notifications page and in the API.

The probe results are set on the Endpoint rows (tests.factories.make_endpoint): what a probe
stores is tested against real servers in tests/probing/."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.models import (
    Certificate,
    Endpoint,
    Notification,
    NotificationChannel,
    NotificationCondition,
    NotificationRule,
)
from issuance.notifications import deliver, webhook_signing
from tests.factories import make_certificate, make_endpoint, make_selfsigned_issuer
from tests.notifications.receivers import HttpReceiver, http_receiver

pytestmark = pytest.mark.django_db
SECRET = "an-endpoint-webhook-secret"


@contextmanager
def receiving(condition: str, **rule: Any) -> Iterator[HttpReceiver]:
    with http_receiver() as receiver:
        channel = NotificationChannel(name="ops")
        channel.url = "webhook+" + receiver.url
        channel.secret = SECRET
        channel.save()
        NotificationRule.objects.create(
            name="endpoints", channel=channel, condition=condition, **rule
        )
        yield receiver


def passes(start: datetime, minutes: int = 3) -> None:
    """The worker's detection and delivery, once a minute."""
    for minute in range(minutes):
        at = start + timedelta(minutes=minute)
        deliver.detect_pass(at)
        deliver.deliver_due(at)


def bodies(receiver: HttpReceiver) -> list[dict[str, Any]]:
    out = []
    for post in receiver.posts:
        assert webhook_signing.verify(SECRET.encode(), post.body, post.headers)
        out.append(json.loads(post.body))
    return out


def web() -> Certificate:
    cert = make_certificate("web", make_selfsigned_issuer())
    cert.revision = 2
    cert.save()
    return cert


def serve_current(endpoint: Endpoint, at: datetime) -> None:
    """What the probe stores when the server was reloaded with the current revision."""
    probe = dict(endpoint.last_probe or {})
    probe.update(
        match="current",
        revision=2,
        behind=0,
        error="",
        errorKind="",
        fingerprintSha256="c" * 64,
        chainVerified=True,
        chainError="",
        hostnameMatch=True,
        notAfter="2027-09-01T00:00:00Z",
        subject="CN=web.example.test",
    )
    Endpoint.objects.filter(pk=endpoint.pk).update(
        match="current",
        served_revision=2,
        served_fingerprint="c" * 64,
        served_since=at,
        probed_at=at,
        last_probe=probe,
    )


def test_stale_fires_once_and_resolves_once() -> None:
    now = timezone.now()
    with receiving(NotificationCondition.ENDPOINT_STALE, notify_resolved=True) as receiver:
        endpoint = make_endpoint(web(), "web-1.example.test", "Stale", now=now)
        make_endpoint(Certificate.objects.get(), "web-2.example.test", "Deployed", now=now)
        passes(now)
        [stale] = bodies(receiver)
        assert stale["condition"] == "endpoint_stale"
        assert stale["subject"] == "Certificate/web"
        assert stale["title"] == "Served certificate stale: web"
        assert stale["body"].startswith(
            "web-1.example.test:443 (certificate web) still serves revision 1, not the current "
            "revision 2, more than 1 h 0 min after it was issued"
        )
        serve_current(endpoint, now + timedelta(minutes=5))
        passes(now + timedelta(minutes=6))
        passes(now + timedelta(minutes=20))
        assert len(receiver.posts) == 2
        resolved = bodies(receiver)[1]
        assert resolved["title"] == "Resolved: served certificate stale: web"
        assert "is no longer serving an older revision" in resolved["body"]
        assert "serves the current revision (2)" in resolved["body"]
    assert Notification.objects.count() == 2


def test_a_newer_revision_while_stale_is_the_same_episode() -> None:
    now = timezone.now()
    with receiving(NotificationCondition.ENDPOINT_STALE, notify_resolved=True) as receiver:
        make_endpoint(web(), "web-1.example.test", "Stale", now=now)
        passes(now)
        # Revision 3 is stored: the endpoint still serves revision 1, Deploying for an hour.
        Endpoint.objects.update(revision_issued_at=now + timedelta(minutes=5))
        passes(now + timedelta(minutes=6))
        passes(now + timedelta(minutes=70))
        assert [b["title"] for b in bodies(receiver)] == ["Served certificate stale: web"]


def test_a_deploying_endpoint_is_not_stale_yet() -> None:
    now = timezone.now()
    with receiving(NotificationCondition.ENDPOINT_STALE) as receiver:
        make_endpoint(web(), "web-1.example.test", "Deploying", now=now)  # issued 10 min ago
        passes(now)
        assert receiver.posts == []
        passes(now + timedelta(minutes=50))  # an hour after the issuance
        assert len(receiver.posts) == 1


def test_unreachable_needs_a_second_probe_and_the_threshold() -> None:
    now = timezone.now()
    with receiving(NotificationCondition.ENDPOINT_UNREACHABLE, notify_resolved=True) as receiver:
        endpoint = make_endpoint(web(), "web-1.example.test", "Unreachable", now=now)
        passes(now, minutes=15)  # one failed probe only: a restart, maybe
        assert receiver.posts == []
        Endpoint.objects.filter(pk=endpoint.pk).update(probed_at=now + timedelta(minutes=10))
        passes(now + timedelta(minutes=10), minutes=5)
        [down] = bodies(receiver)
        assert down["title"] == "Endpoint unreachable: web"
        assert "could not be read since" in down["body"]
        assert "refused: connection refused" in down["body"]
        serve_current(endpoint, now + timedelta(minutes=20))
        passes(now + timedelta(minutes=21))
        assert [b["title"] for b in bodies(receiver)] == [
            "Endpoint unreachable: web",
            "Resolved: endpoint unreachable: web",
        ]


def test_a_rules_threshold_is_in_minutes_for_unreachable() -> None:
    now = timezone.now()
    with receiving(NotificationCondition.ENDPOINT_UNREACHABLE, threshold=60) as receiver:
        endpoint = make_endpoint(web(), "web-1.example.test", "Unreachable", now=now)
        Endpoint.objects.filter(pk=endpoint.pk).update(probed_at=now + timedelta(minutes=10))
        passes(now + timedelta(minutes=10))
        assert receiver.posts == []
        passes(now + timedelta(minutes=60))
        assert len(receiver.posts) == 1


@pytest.mark.parametrize(
    ("state", "probe", "says"),
    [
        ("Deployed", {"hostnameMatch": False}, "the certificate does not name web-1.example.test"),
        (
            "Deployed",
            {"chainVerified": False, "chainError": "the chain does not lead to the CA"},
            "the chain does not verify: the chain does not lead to the CA",
        ),
        ("Mismatch", {}, "serves a certificate this one never had (CN=web-1.example.test)"),
    ],
)
def test_mismatch_fires_once_and_resolves(state: str, probe: dict[str, Any], says: str) -> None:
    now = timezone.now()
    with receiving(NotificationCondition.ENDPOINT_MISMATCH, notify_resolved=True) as receiver:
        endpoint = make_endpoint(web(), "web-1.example.test", state, now=now, **probe)
        make_endpoint(Certificate.objects.get(), "web-2.example.test", "Deployed", now=now)
        passes(now)
        [found] = bodies(receiver)
        assert found["title"] == "Served chain or hostname mismatch: web"
        assert says in found["body"]
        serve_current(endpoint, now + timedelta(minutes=5))
        passes(now + timedelta(minutes=5))
        assert len(receiver.posts) == 2
        assert bodies(receiver)[1]["title"] == ("Resolved: served chain or hostname mismatch: web")


def test_served_certificate_expiring_fires_once_per_served_certificate() -> None:
    now = timezone.now()
    soon = (now + timedelta(days=5)).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    with receiving(NotificationCondition.ENDPOINT_EXPIRING, notify_resolved=True) as receiver:
        cert = web()
        endpoint = make_endpoint(cert, "web-1.example.test", "Stale", now=now, notAfter=soon)
        make_endpoint(cert, "web-2.example.test", "Deployed", now=now)  # expires in 2027
        passes(now)
        [expiring] = bodies(receiver)
        assert expiring["title"] == "Served certificate expiring: web"
        assert f"serves a certificate that expires at {soon}" in expiring["body"]
        serve_current(endpoint, now + timedelta(minutes=5))  # a new one, until 2027-09
        passes(now + timedelta(minutes=5))
        assert len(receiver.posts) == 2
        assert "is no longer serving that expiring certificate" in bodies(receiver)[1]["body"]


def test_a_removed_endpoint_resolves_its_episode() -> None:
    now = timezone.now()
    with receiving(
        NotificationCondition.ENDPOINT_STALE, notify_resolved=True, issuer_pattern="self*"
    ) as receiver:
        endpoint = make_endpoint(web(), "web-1.example.test", "Stale", now=now)
        passes(now)
        endpoint.delete()
        passes(now + timedelta(minutes=5))
        assert [b["title"] for b in bodies(receiver)] == [
            "Served certificate stale: web",
            "Endpoint removed: web",
        ]


def test_without_notify_resolved_only_the_start_is_sent() -> None:
    now = timezone.now()
    with receiving(NotificationCondition.ENDPOINT_STALE) as receiver:
        endpoint = make_endpoint(web(), "web-1.example.test", "Stale", now=now)
        passes(now)
        serve_current(endpoint, now + timedelta(minutes=5))
        passes(now + timedelta(minutes=5))
        assert len(receiver.posts) == 1
        # Switched on later: an episode that ended more than an hour ago is not news.
        NotificationRule.objects.update(notify_resolved=True)
        passes(now + timedelta(hours=2))
        assert len(receiver.posts) == 1


def test_a_new_episode_is_reported_again_and_patterns_filter() -> None:
    now = timezone.now()
    with receiving(NotificationCondition.ENDPOINT_STALE, name_pattern="web*") as receiver:
        endpoint = make_endpoint(web(), "web-1.example.test", "Stale", now=now)
        other = make_certificate("api", make_selfsigned_issuer("other"))
        make_endpoint(other, "api.example.test", "Stale", now=now)
        passes(now)
        assert [b["subject"] for b in bodies(receiver)] == ["Certificate/web"]
        # Reloaded with the current revision, then rolled back to the old one.
        serve_current(endpoint, now + timedelta(minutes=5))
        passes(now + timedelta(minutes=5))
        Endpoint.objects.filter(pk=endpoint.pk).update(
            match="previous",
            served_fingerprint="old".ljust(64, "0"),
            served_since=now + timedelta(minutes=10),
        )
        passes(now + timedelta(minutes=10))
        assert len(receiver.posts) == 2


# -- where rules are made ------------------------------------------------------------------

ENDPOINT_CONDITIONS = (
    "endpoint_stale",
    "endpoint_unreachable",
    "endpoint_mismatch",
    "endpoint_expiring",
)


def test_the_page_offers_the_endpoint_conditions(make_user: Callable[..., User]) -> None:
    admin = Client()
    admin.force_login(make_user("admin", "admin"))
    channel = NotificationChannel(name="ops")
    channel.url = "json://hooks.example.test/x"
    channel.save()
    html = admin.get("/notifications/").content.decode()
    for value, label in (
        ("endpoint_stale", "Served certificate stale"),
        ("endpoint_unreachable", "Endpoint unreachable"),
        ("endpoint_mismatch", "Served chain or hostname mismatch"),
        ("endpoint_expiring", "Served certificate expiring"),
    ):
        assert f'<option value="{value}">{label}</option>' in html
        response = admin.post(
            "/notifications/rules/new/",
            {"name": value.replace("_", "-"), "channel": "ops", "condition": value},
        )
        assert response.status_code == 302
    assert set(NotificationRule.objects.values_list("condition", flat=True)) == set(
        ENDPOINT_CONDITIONS
    )


def test_the_api_takes_the_endpoint_conditions(make_user: Callable[..., User]) -> None:
    admin = APIClient()
    admin.force_authenticate(make_user("admin", "admin"))
    channel = NotificationChannel(name="ops")
    channel.url = "json://hooks.example.test/x"
    channel.save()
    created = admin.post(
        "/api/v1/notification-rules/",
        {
            "name": "stale",
            "channel": "ops",
            "condition": "endpoint_stale",
            "notifyResolved": True,
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["condition"] == "endpoint_stale"
    listed = admin.get("/api/v1/notification-rules/", {"condition": "endpoint_stale"}).json()
    items = listed["results"] if isinstance(listed, dict) else listed
    assert [r["name"] for r in items] == ["stale"]
    schema = admin.get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    condition = components["RuleCreateRequest"]["properties"]["condition"]
    enum = components[condition["allOf"][0]["$ref"].rsplit("/", 1)[1]]["enum"]
    assert set(ENDPOINT_CONDITIONS) <= set(enum)
