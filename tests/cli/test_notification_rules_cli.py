"""Notification channels and rules from the command line: `apply -f` manifests (kinds
NotificationChannel and NotificationRule) and `certctl rules list|create|delete`, through the
same checks as the API and the Notifications page."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from issuance.models import Event, NotificationChannel, NotificationRule

pytestmark = pytest.mark.django_db

CHANNEL_URL = "json://hooks.example.test/secret-path-token"
MANIFEST = f"""\
apiVersion: issuance.console/v1
kind: NotificationRule
metadata:
  name: web-expiring
spec:
  channel: ops
  condition: expiring
  threshold: 10
  namePattern: web-*
---
apiVersion: issuance.console/v1
kind: NotificationChannel
metadata:
  name: ops
spec:
  url: {CHANNEL_URL}
  rateLimitPerHour: 5
"""


def apply(tmp_path: Path, text: str) -> tuple[str, str]:
    path = tmp_path / "notifications.yaml"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    call_command("apply", "-f", str(path), "--as", "alice", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def certctl(*args: str) -> str:
    out = io.StringIO()
    call_command("certctl", *args, stdout=out)
    return out.getvalue()


def test_apply_creates_the_channel_before_its_rule_and_reapply_is_unchanged(
    tmp_path: Path,
) -> None:
    out, _ = apply(tmp_path, MANIFEST)
    assert out.splitlines() == [
        "notificationchannel.issuance.console/ops created",
        "notificationrule.issuance.console/web-expiring created",
    ]
    assert "secret-path-token" not in out
    rule = NotificationRule.objects.select_related("channel").get()
    assert (rule.channel.name, rule.condition, rule.threshold, rule.name_pattern) == (
        "ops",
        "expiring",
        10,
        "web-*",
    )
    channel = NotificationChannel.objects.get()
    assert (channel.url, channel.rate_limit_per_hour) == (CHANNEL_URL, 5)
    assert Event.objects.get(kind="NotificationRule", reason="Created").actor == "alice"
    events = Event.objects.count()

    again, _ = apply(tmp_path, MANIFEST)
    assert again.split() == [
        "notificationchannel.issuance.console/ops",
        "unchanged",
        "notificationrule.issuance.console/web-expiring",
        "unchanged",
    ]
    assert Event.objects.count() == events

    # The manifest is the whole rule: a field left out goes back to its default.
    edited = MANIFEST.replace("  threshold: 10\n", "").replace(
        "condition: expiring", "condition: backoff"
    )
    changed, _ = apply(tmp_path, edited)
    assert "notificationrule.issuance.console/web-expiring configured" in changed
    assert "notificationchannel.issuance.console/ops unchanged" in changed
    rule.refresh_from_db()
    assert (rule.condition, rule.threshold, rule.name_pattern) == ("backoff", 0, "web-*")


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        ("channel: ops", "channel: nope", "spec.channel: No notification channel named 'nope'."),
        ("condition: expiring", "condition: test", "spec.condition: must be one of"),
        ("threshold: 10", "threshold: -1", "spec.threshold:"),
        ("namePattern: web-*", "namePattern: Web-*", "spec.namePattern: Only lowercase"),
        ("namePattern: web-*", "colour: red", "spec.colour: unsupported field"),
        (f"url: {CHANNEL_URL}", "url: nosuch://x", "spec.url:"),
        ("rateLimitPerHour: 5", "rateLimitPerHour: 0", "spec.rateLimitPerHour:"),
        (
            "apiVersion: issuance.console/v1\nkind: NotificationRule",
            "apiVersion: cert-manager.io/v1\nkind: NotificationRule",
            "apiVersion: must be issuance.console/v1",
        ),
    ],
)
def test_a_bad_document_names_its_field_and_nothing_is_applied(
    tmp_path: Path, old: str, new: str, error: str
) -> None:
    assert old in MANIFEST
    with pytest.raises(CommandError) as raised:
        apply(tmp_path, MANIFEST.replace(old, new, 1))
    assert error in str(raised.value)
    assert "nothing applied" in str(raised.value)
    assert "secret-path-token" not in str(raised.value)
    assert not NotificationChannel.objects.exists()
    assert not NotificationRule.objects.exists()


def test_certctl_creates_lists_and_deletes_rules() -> None:
    channel = NotificationChannel(name="ops")
    channel.url = CHANNEL_URL
    channel.save()
    created = certctl(
        "rules",
        "create",
        "web-expiring",
        "--channel",
        "ops",
        "--condition",
        "expiring",
        "--threshold",
        "10",
        "--name-pattern",
        "web-*",
        "--as",
        "bob",
    )
    assert created.strip() == "notificationrule.issuance.console/web-expiring created"
    certctl(
        "rules",
        "create",
        "failures",
        "--channel",
        "ops",
        "--condition",
        "issuance_failed",
        "--disabled",
    )
    listing = certctl("rules", "list").splitlines()
    assert listing[0].split() == [
        "NAME",
        "CHANNEL",
        "CONDITION",
        "THRESHOLD",
        "NAME",
        "PATTERN",
        "ISSUER",
        "PATTERN",
        "ON",
    ]
    assert [line.split() for line in listing[1:]] == [
        ["failures", "ops", "issuance_failed", "0", "-", "-", "no"],
        ["web-expiring", "ops", "expiring", "10", "web-*", "-", "yes"],
    ]
    assert [
        line.split()[0] for line in certctl("rules", "list", "--channel", "other").splitlines()
    ] == ["NAME"]
    assert Event.objects.get(name="web-expiring", reason="Created").actor == "bob"

    with pytest.raises(CommandError) as raised:
        certctl(
            "rules",
            "create",
            "x",
            "--channel",
            "nope",
            "--condition",
            "backoff",
            "--name-pattern",
            "A*",
        )
    assert "--channel: No notification channel named 'nope'." in str(raised.value)
    assert "--name-pattern: Only lowercase" in str(raised.value)
    with pytest.raises(CommandError, match="already exists"):
        certctl("rules", "create", "failures", "--channel", "ops", "--condition", "backoff")
    with pytest.raises(CommandError, match="not found: nope"):
        certctl("rules", "delete", "failures", "nope")
    assert NotificationRule.objects.count() == 2  # nothing deleted when one name is unknown

    assert certctl("rules", "delete", "failures", "web-expiring", "--as", "bob").splitlines() == [
        "notificationrule.issuance.console/failures deleted",
        "notificationrule.issuance.console/web-expiring deleted",
    ]
    assert not NotificationRule.objects.exists()
    assert Event.objects.get(name="failures", reason="Deleted").actor == "bob"
