"""The approval queue and certctl treat bootstrap, API and Kubernetes requests alike."""

from __future__ import annotations

from collections.abc import Callable
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.models import Approval, Event
from tests.approval.test_policy import RULES, external, issuer_with
from tests.helpers import drain

pytestmark = pytest.mark.django_db


def test_queue_page_shows_each_check_and_the_failing_one(role_users: dict[str, User]) -> None:
    issuer = issuer_with({"rules": RULES})
    external(issuer, name="node-2-serving", cn="system:node:node-2")
    drain()
    client = Client()
    client.force_login(role_users["approver"])
    page = client.get("/requests/").content.decode()
    assert "node-2-serving" in page and "(bootstrap)" in page
    for name in RULES:
        assert name in page
    assert "✗ commonNameMustMatchRequester" in page
    assert "differs from requester" in page
    assert "check commonNameMustMatchRequester failed" in page


@pytest.mark.parametrize("source", ["api", "bootstrap", "kubernetes"])
def test_certctl_decides_for_every_source(source: str) -> None:
    issuer = issuer_with({"autoApprove": "none"})
    ok = external(issuer, name=f"ok-{source}", source=source)
    no = external(issuer, name=f"no-{source}", source=source)
    drain()
    before = timezone.now()
    call_command(
        "certctl", "approve", ok.name, "--reason", "Known", "--as", "erin", stdout=StringIO()
    )
    call_command(
        "certctl",
        "deny",
        no.name,
        "--reason",
        "Unknown",
        "--message",
        "who?",
        "--as",
        "erin",
        stdout=StringIO(),
    )
    ok.refresh_from_db()
    no.refresh_from_db()
    assert (ok.approval, ok.decided_by) == (Approval.APPROVED, "erin")
    assert (no.approval, no.decided_by) == (Approval.DENIED, "erin")
    assert ok.decided_at is not None and ok.decided_at >= before
    denied = Event.objects.get(name=no.name, reason="Denied", actor="erin")
    assert denied.message == "Unknown: who?"


def test_api_shows_the_policy_verdict(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> None:
    issuer = issuer_with({"rules": RULES})
    external(issuer, name="node-3-serving", ips=("192.168.7.7",))
    drain()
    body = api_client_for(role_users["viewer"]).get("/api/v1/certificaterequests/node-3-serving/")
    verdict = body.json()["status"]["policyChecks"]
    assert verdict["outcome"] == "pending"
    failed = [c for c in verdict["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["ipSanCidrs"]
    assert "192.168.7.7" in failed[0]["detail"]
