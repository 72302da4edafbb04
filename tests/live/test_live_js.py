"""static/js/live.js in the system Chromium against the real ASGI app (uvicorn in a thread, so
commits made here publish through the in-memory layer as under `manage.py serve`).

The page under test is synthetic (served through Playwright routing at the app's origin) so
each rule of the live.js contract can be checked on its own: scoped refresh, live:message,
countdowns, polling fallback, reconnect.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from issuance.models import Certificate
from issuance.timing.durations import format_relative
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.live.conftest import session_cookie

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    # The synthetic page is fulfilled by Playwright, not fetched from 127.0.0.1, so Chromium
    # would treat its WebSocket to 127.0.0.1 as a public page reaching into the local network.
    "--disable-features=LocalNetworkAccessChecks,BlockInsecurePrivateNetworkRequests",
]
LIVE_JS = Path(__file__).resolve().parents[2] / "console" / "static" / "js" / "live.js"

PAGE = """<!DOCTYPE html><html><head><script src="/static/js/live.js" defer></script></head>
<body data-live-groups="{groups}" data-poll-interval="1">
<span id="live-status" role="status"></span>
<section id="web" data-live-refresh="/__partial__/web" data-live-topics="certificate:web">initial</section>
<p><time id="future" data-countdown="{future}">server text</time>
<time id="past" data-countdown="{past}">server text</time></p>
</body></html>"""


# Playwright answers routed requests only while this thread is inside a Playwright call:
# wait with page.wait_for_timeout(), never time.sleep(), or the partial fetches stall.


class Server:
    """uvicorn serving console.asgi:application in a thread of this process."""

    def __init__(self, port: int) -> None:
        import uvicorn

        from console.asgi import application

        config = uvicorn.Config(
            application, host="127.0.0.1", port=port, log_level="warning", lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def server(transactional_db: None, port: int) -> Iterator[Server]:
    srv = Server(port)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install the Debian chromium package")
    # Playwright's sync API keeps an asyncio loop on this thread while the browser is open;
    # the ORM calls between browser steps (and the test database flush) are synchronous all
    # the same. Django's async guard is lifted for exactly that span.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def open_page(browser: Any, port: int) -> Iterator[Callable[..., tuple[Any, list[str]]]]:
    """A synthetic page at the server's origin; returns (page, partial fetch log)."""
    contexts: list[Any] = []
    base = f"http://127.0.0.1:{port}"

    def open_(cookie: str | None, groups: str = "certificate:web") -> tuple[Any, list[str]]:
        context = browser.new_context(base_url=base)
        context.set_default_timeout(15_000)
        contexts.append(context)
        if cookie:
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": base}])
        fetches: list[str] = []

        def partial(route: Any) -> None:
            fetches.append(route.request.url)
            due = (timezone.now() + timedelta(hours=2, seconds=-30)).isoformat()
            body = f'fetch {len(fetches)} <time data-countdown="{due}">x</time>'
            route.fulfill(status=200, content_type="text/html", body=body)

        now = timezone.now()
        html = PAGE.format(
            groups=groups,
            future=(now + timedelta(seconds=125)).isoformat(),
            past=(now - timedelta(seconds=5)).isoformat(),
        )
        context.route(f"{base}/__page__", lambda r: r.fulfill(content_type="text/html", body=html))
        context.route(f"{base}/__partial__/**", partial)
        page = context.new_page()
        page.add_init_script(
            "window.__msgs = [];"
            "document.addEventListener('live:message', e => window.__msgs.push(e.detail));"
        )
        page.goto("/__page__")
        return page, fetches

    yield open_
    for context in contexts:
        context.close()


def save(name: str, revision: int) -> None:
    cert = Certificate.objects.get(name=name)
    cert.revision = revision
    cert.save()


@pytest.fixture
def viewer(make_user: Callable[..., User]) -> str:
    issuer = make_selfsigned_issuer()
    make_certificate("web", issuer)
    make_certificate("other", issuer)
    return session_cookie(make_user("viewer-js", "viewer"))


def test_scoped_refresh_and_live_message(server: Server, viewer: str, open_page: Any) -> None:
    page, fetches = open_page(viewer)
    page.locator("#live-status[data-state=live]").wait_for()
    assert page.locator("#live-status").inner_text() == "live"
    page.wait_for_timeout(300)  # the subscribe frame is on its way

    save("other", 4)  # not a topic of this page
    page.wait_for_timeout(1000)
    assert fetches == []
    assert page.evaluate("window.__msgs.filter(m => m.group).length") == 0

    save("web", 5)
    page.wait_for_function(
        "window.__msgs.some(m => m.type === 'certificate.status' && m.name === 'web'"
        " && m.revision === 5 && m.group === 'certificate:web')"
    )
    page.locator("#web", has_text="fetch 1").wait_for()
    # The refreshed part's countdown is ticked at once, not left with the server's text.
    assert page.locator("#web time").inner_text().startswith("in 1h 59m")

    # Several messages in a burst: debounced refetches, not one per message. Three separate
    # commits usually land within the 250 ms debounce (one refetch); on a loaded machine two
    # of them can land further apart (two), never one refetch per message.
    for revision in (6, 7, 8):
        save("web", revision)
    page.wait_for_function("window.__msgs.filter(m => m.revision === 8).length === 1")
    page.wait_for_timeout(1000)
    assert page.evaluate("window.__msgs.filter(m => m.revision >= 6).length") == 3
    assert 1 <= len(fetches) - 1 < 3, fetches


def test_countdowns_tick_locally(server: Server, viewer: str, open_page: Any) -> None:
    page, _ = open_page(viewer)
    future = page.locator("#future")
    page.wait_for_function("document.getElementById('future').textContent.startsWith('in 2m')")
    first = future.inner_text()
    page.wait_for_function(
        f"document.getElementById('future').textContent !== {first!r}", timeout=3000
    )
    assert page.locator("#past").inner_text().endswith("s ago")
    # The browser ticks the same text the server renders (issuance.timing.durations.format_relative).
    offsets = [3599.4, -90061, 0.3, -0.9, -5, 2.5, 59.5, 3 * 3600 + 62, 2 * 86400 + 3 * 3600 + 240]
    formats = page.evaluate(
        "(offsets) => offsets.map((s) => IssuanceLive.relative(1.7e12 + s * 1000, 1.7e12))",
        offsets,
    )
    assert formats == [format_relative(s) for s in offsets]
    assert formats[:3] == ["in 59m 59s", "1d 1h ago", "now"]


def test_refused_socket_falls_back_to_polling(server: Server, viewer: str, open_page: Any) -> None:
    page, fetches = open_page(None)  # no session: the server closes with 4401
    page.locator("#live-status[data-state=paused]").wait_for()
    # Said in words (and to screen readers), not only by colour.
    assert page.locator("#live-status").inner_text() == "live updates paused"
    deadline = time.monotonic() + 6
    while len(fetches) < 3 and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert len(fetches) >= 3, "sections were not polled every data-poll-interval"


def test_reconnects_after_server_restart(
    server: Server, port: int, viewer: str, open_page: Any
) -> None:
    page, fetches = open_page(viewer)
    page.locator("#live-status[data-state=live]").wait_for()
    server.stop()
    page.wait_for_function(
        "['reconnecting', 'paused'].includes(document.getElementById('live-status').dataset.state)"
    )
    again = Server(port)
    try:
        page.locator("#live-status[data-state=live]").wait_for(timeout=20_000)
        # Whatever happened while disconnected was missed: every part is fetched once.
        page.locator("#web", has_text="fetch").wait_for()
        page.wait_for_timeout(300)
        save("web", 9)
        page.wait_for_function("window.__msgs.some(m => m.revision === 9)")
        assert len(fetches) >= 1
    finally:
        again.stop()
