"""The live badge and polling in a real Chromium while Redis (the channel layer) is down.

`manage.py serve` (web + worker) uses a private redis-server that the test kills or stops
with SIGSTOP and then brings back: the badge says "live updates paused" in words, the
certificate list keeps updating by polling, and when Redis is back the badge says "live"
again and changes are pushed (polling has stopped), with no reload.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.specs.certificate import apply_certificate
from issuance.specs.issuer import apply_issuer
from tests.browser.pages import login
from tests.live.outage import RedisServer, start_redis

pytestmark = [pytest.mark.browser, pytest.mark.redis, pytest.mark.timeout(240)]

# From Redis failing to the badge saying so (heartbeat every 2 s, 3 s to answer).
PAUSE_BOUND_MS = 15_000
# From Redis returning to the badge saying "live" again.
RESUME_BOUND_MS = 15_000
# A change reaching the list by polling (every 5 s: data-poll-interval) or by a push.
UPDATE_BOUND_MS = 20_000


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path / "redis")
    yield server
    server.stop()


def add_certificate(name: str) -> None:
    """Created here; the server's worker issues it, and its saves are what pages show."""
    spec = {"secretName": f"{name}-tls", "dnsNames": [f"{name}.example.test"]}
    apply_certificate(name, {**spec, "issuerRef": {"name": "selfsigned"}}, actor="test")


def badge(page: Any) -> dict[str, Any]:
    return dict(
        page.evaluate(
            "(() => { const el = document.getElementById('live-status');"
            " return {state: el.dataset.state, text: el.textContent, role: el.getAttribute('role'),"
            " polling: IssuanceLive.state().polling}; })()"
        )
    )


@pytest.mark.parametrize("outage", ["refused", "frozen"])
def test_badge_pauses_page_polls_then_live_again(
    start_server: Callable[..., str],
    new_page: Callable[..., Any],
    screenshot: Callable[[Any, str], Any],
    role_users: dict[str, User],
    private_redis: RedisServer,
    outage: str,
) -> None:
    apply_issuer("selfsigned", {"selfSigned": {}}, actor="test")
    base = start_server(env={"REDIS_URL": private_redis.url})
    page = new_page(base)
    login(page, "viewer")
    page.goto("/certificates/")
    page.locator("#live-status[data-state=live]").wait_for()
    table = page.locator("#certificate-table")

    add_certificate("pushed-before")
    table.get_by_text("pushed-before", exact=True).wait_for(timeout=UPDATE_BOUND_MS)

    started = time.monotonic()
    if outage == "refused":
        private_redis.kill()
    else:
        private_redis.freeze()
    page.locator("#live-status[data-state=paused]").wait_for(timeout=PAUSE_BOUND_MS)
    paused_after = time.monotonic() - started
    state = badge(page)
    assert state["text"] == "live updates paused"  # in words, announced (role=status)
    assert state["role"] == "status"
    assert state["polling"] is True
    screenshot(page, f"paused-{outage}")

    started = time.monotonic()
    add_certificate("polled-during")
    table.get_by_text("polled-during", exact=True).wait_for(timeout=UPDATE_BOUND_MS)
    polled_after = time.monotonic() - started

    started = time.monotonic()
    if outage == "refused":
        private_redis.restart()
    else:
        private_redis.thaw()
    page.locator("#live-status[data-state=live]").wait_for(timeout=RESUME_BOUND_MS)
    live_after = time.monotonic() - started
    assert badge(page)["polling"] is False

    started = time.monotonic()
    add_certificate("pushed-after")
    table.get_by_text("pushed-after", exact=True).wait_for(timeout=UPDATE_BOUND_MS)
    pushed_after = time.monotonic() - started
    assert badge(page) == {"state": "live", "text": "live", "role": "status", "polling": False}
    screenshot(page, f"live-again-{outage}")
    print(
        f"\n{outage}: badge paused after {paused_after:.1f} s, list updated by polling in "
        f"{polled_after:.1f} s, live {live_after:.1f} s after Redis came back, "
        f"next change pushed in {pushed_after:.1f} s"
    )
