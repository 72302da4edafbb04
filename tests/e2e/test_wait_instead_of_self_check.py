"""A solver's `waitInsteadOfSelfCheck` (cert-manager 1.21), end to end with Pebble: the
self-check is skipped (it could never pass here: it looks at a port nothing listens on),
the challenge is answered once the wait has passed since it was presented, and the
certificate is issued."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from pytest_django import Settings

from issuance.models import Certificate, Challenge, Event, Issuer
from tests.e2e.conftest import AcmeStack, Drive
from tests.e2e.servers import free_port
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_challenge_is_answered_after_the_wait_without_a_self_check(
    acme_stack: Callable[..., AcmeStack], drive: Drive, settings: Settings, tmp_path: Path
) -> None:
    stack = acme_stack()
    settings.HTTP01_SELF_CHECK_PORT = free_port()  # a self-check would fail: nothing there
    spec = stack.issuer_spec(solvers=[{"http01": {}, "waitInsteadOfSelfCheck": "3s"}])
    manifest = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": "pebble"},
        "spec": spec,
    }
    path = tmp_path / "issuer.yaml"
    path.write_text(yaml.safe_dump(manifest))
    call_command("apply", "-f", str(path), stdout=io.StringIO())
    issuer = Issuer.objects.get(name="pebble")
    assert issuer.spec["acme"]["solvers"][0]["waitInsteadOfSelfCheck"] == "3s"

    make_certificate("web", issuer, dnsNames=["web.example.test"])
    drive(lambda: Certificate.objects.get(name="web").condition_is("Ready"), timeout=120)
    [challenge] = Challenge.objects.filter(order__request__certificate__name="web")
    assert challenge.state == "valid"
    events = {
        e.reason: e.created_at for e in Event.objects.filter(kind="Challenge", name=challenge.name)
    }
    assert "SelfCheckFailed" not in events
    assert "Presented" in events
    # The wait counts from the moment the challenge was presented (its presented_at; the
    # Presented entry is written a few milliseconds after it, and once came 2.99 s before
    # the Accepted one on a loaded machine), up to the answer.
    assert challenge.presented_at is not None
    waited = (events["Accepted"] - challenge.presented_at).total_seconds()
    assert waited >= 3, waited
