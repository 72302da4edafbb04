"""An ACME certificate from Pebble, watched in the browser: order, HTTP-01 challenge, Ready.

The app (`manage.py serve`) listens on Pebble's HTTP-01 port, so the CA's validation
requests are answered by the same process the browser talks to.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import Certificate, Challenge, Order
from issuance.specs.issuer import apply_issuer
from tests.browser.pages import login
from tests.e2e.servers import ChallTestSrv, PebbleServer, free_port, pebble_stack
from tests.helpers import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def pebble(tmp_path: Path) -> Iterator[tuple[PebbleServer, ChallTestSrv]]:
    with pebble_stack(tmp_path, http_port=free_port()) as stack:
        yield stack


def test_acme_certificate_live(
    pebble: tuple[PebbleServer, ChallTestSrv],
    start_server: Callable[..., str],
    new_page: Callable[..., Any],
    screenshot: Callable[[Any, str], Any],
    role_users: dict[str, User],
) -> None:
    ca, dns = pebble
    base = start_server(
        port=ca.http_port,
        env={
            "HTTP01_SELF_CHECK_PORT": str(ca.http_port),
            "SELF_CHECK_NAMESERVERS": dns.dns_address,
        },
    )
    apply_issuer(
        "pebble",
        {
            "acme": {
                "server": ca.directory_url,
                "email": "browser@example.test",
                "caBundle": ca.ca_bundle_b64,
                "solvers": [{"http01": {}}],
            }
        },
        actor="test",
    )
    page = new_page(base)
    login(page, "operator")
    page.click("text=Issuers")
    row = page.locator("tr[data-issuer=pebble]")
    # The ACME account is registered by the worker; the issuers table follows live.
    row.locator(".badge", has_text="True").wait_for(timeout=60_000)
    assert re.search(r"https://127\.0\.0\.1:\d+/", row.inner_text())  # account URI
    assert "HTTP-01: default" in row.inner_text()
    screenshot(page, "issuers")

    page.goto("/new-certificate/")
    page.fill("input[name=name]", "acme-web")
    page.select_option("select[name=issuer]", "pebble")
    page.fill("textarea[name=dns_names]", "acme-web.example.test\nwww.acme-web.example.test")
    page.click("#new-certificate button[type=submit]")
    page.wait_for_url(re.compile(r"/certificates/acme-web/$"))
    page.evaluate("window.__sameDocument = true")

    status = page.locator("#certificate-status")
    status.locator(".badge", has_text="Ready").first.wait_for(timeout=120_000)
    chain = page.locator("#certificate-chain")
    chain.locator("li", has_text="Order").locator(".badge", has_text="valid").first.wait_for(
        timeout=15_000
    )
    assert page.evaluate("window.__sameDocument") is True
    text = chain.inner_text()
    assert "Challenge http-01 for acme-web.example.test" in text
    assert "Challenge http-01 for www.acme-web.example.test" in text
    # The timeline is a live section of its own: it may follow the status a moment later.
    timeline = page.locator("#certificate-timeline")
    for reason in ("Presented", "Accepted", "Issued"):
        timeline.filter(has_text=reason).wait_for(timeout=30_000)
    screenshot(page, "ready")

    cert = Certificate.objects.get(name="acme-web")
    assert cert.condition_is("Ready")
    order = Order.objects.get(request__certificate=cert)
    assert order.state == "valid"
    assert set(Challenge.objects.filter(order=order).values_list("state", flat=True)) == {"valid"}

    # The challenges page lists them as finished; the orders page has the order.
    page.goto("/challenges/?status=finished")
    assert page.locator("td", has_text="www.acme-web.example.test").count() == 1
    page.goto("/orders/")
    assert order.name in page.locator("table").inner_text()
    wait_for(lambda: not Challenge.objects.filter(processing=True).exists(), 30, "slots freed")
