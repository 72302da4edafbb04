"""Issue 25, items 6 and 7 in a real Chromium: bulk buttons that look disabled and say why,
the Copy button beside a token shown once (clipboard API and its fallback), and the charts'
axis labels readable on a phone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import Certificate
from issuance.specs.certificate import apply_certificate
from issuance.specs.issuer import apply_issuer
from tests.browser.a11y import PHONE, check_page, shoot, viewport
from tests.browser.conftest import SCREENSHOTS
from tests.browser.pages import login

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]

STYLE = """(selector) => {
  const s = getComputedStyle(document.querySelector(selector));
  return {background: s.backgroundColor, border: s.borderTopStyle, cursor: s.cursor,
          color: s.color};
}"""


@pytest.fixture(autouse=True)
def app(server: str) -> str:
    return server


@pytest.fixture
def two_certificates(role_users: dict[str, User]) -> Any:
    apply_issuer("selfsigned", {"selfSigned": {}}, actor="test")
    for name in ("one", "two"):
        spec = {"dnsNames": [f"{name}.example.test"], "issuerRef": {"name": "selfsigned"}}
        apply_certificate(name, spec, actor="test")
    yield
    Certificate.objects.all().delete()


def test_bulk_buttons_look_disabled_and_say_why(new_page: NewPage, two_certificates: Any) -> None:
    page = new_page()
    login(page, "operator")
    page.goto("/certificates/")
    delete = "button[data-bulk-button][value=delete]"
    hint = page.locator("#bulk-hint")
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        disabled = page.evaluate(STYLE, delete)
        # Not the red fill of an armed Delete: a dashed outline and the not-allowed cursor.
        assert disabled["border"] == "dashed" and disabled["cursor"] == "not-allowed", disabled
        assert disabled["background"] not in ("rgb(180, 35, 24)",), (scheme, disabled)
        shoot(page, "bulk-disabled", scheme)
    page.emulate_media(color_scheme="light")
    assert page.get_attribute(delete, "aria-disabled") == "true"
    assert page.get_attribute(delete, "aria-describedby") == "bulk-hint"
    assert page.get_attribute(delete, "title") == hint.inner_text()
    assert hint.is_visible() and "Select certificates first" in hint.inner_text()
    # The keyboard reaches it (it is not `disabled`), and Enter does nothing.
    page.focus(delete)
    assert page.evaluate("document.activeElement.value") == "delete"
    page.keyboard.press("Enter")
    page.wait_for_timeout(300)
    assert page.url.endswith("/certificates/")
    check_page(page, "bulk-buttons-disabled")

    page.locator("input[data-select-row][value=one]").check()
    assert page.get_attribute(delete, "aria-disabled") == "false"
    assert page.get_attribute(delete, "aria-describedby") is None
    assert not hint.is_visible()
    armed = page.evaluate(STYLE, delete)
    assert armed["border"] == "solid" and armed["background"] == "rgb(180, 35, 24)", armed
    page.click("button[data-bulk-button][value=renew]")  # and now it acts
    page.wait_for_url("**/bulk/")
    assert page.locator("h1").inner_text() == "Renew 1 certificate"  # not "1 certificates"


def _new_token(page: Any) -> str:
    page.goto("/account/tokens/")
    page.fill("#new-token-form input[name=name]", "ci")
    page.click("#new-token-form button[type=submit]")
    page.locator("#token-text").wait_for()
    return str(page.locator("#token-text").inner_text()).strip()


def test_copy_button_copies_the_token(
    browser: Any, server: str, role_users: dict[str, User]
) -> None:
    context = browser.new_context(base_url=server, viewport={"width": 1280, "height": 800})
    try:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
        page = context.new_page()
        login(page, "operator")
        token = _new_token(page)
        button = page.locator("button[data-copy=token-text]")
        assert button.is_visible() and button.inner_text() == "Copy"
        button.click()
        page.locator(".copy-status", has_text="Copied.").wait_for()
        assert page.evaluate("navigator.clipboard.readText()") == token
        check_page(page, "token-copy")
    finally:
        context.close()


def test_copy_button_without_the_clipboard_api(
    browser: Any, server: str, role_users: dict[str, User]
) -> None:
    """No navigator.clipboard (an http address that is not localhost): the token is selected
    and copied the old way, or left selected with a hint to press Ctrl+C."""
    context = browser.new_context(base_url=server, viewport={"width": 1280, "height": 800})
    try:
        context.add_init_script("Object.defineProperty(navigator, 'clipboard', {value: undefined})")
        page = context.new_page()
        login(page, "operator")
        token = _new_token(page)
        page.click("button[data-copy=token-text]")
        status = page.locator(".copy-status")
        status.wait_for()
        assert status.inner_text() in ("Copied.", "Selected: press Ctrl+C (⌘C) to copy.")
        assert page.evaluate("String(window.getSelection())").strip() == token
    finally:
        context.close()


def test_chart_labels_are_readable_on_a_phone(new_page: NewPage, two_certificates: Any) -> None:
    page = new_page()
    login(page, "viewer")
    page.goto("/")
    with viewport(page, PHONE):
        assert not page.locator("#chart-renewals .chart-svg-full").is_visible()
        assert page.locator("#chart-renewals .chart-svg-compact").is_visible()
        heights = page.evaluate(
            """() => [...document.querySelectorAll('.chart-svg .chart-axis text')]
                 .filter(t => t.getBoundingClientRect().height > 0)
                 .map(t => t.getBoundingClientRect().height)"""
        )
        assert heights and min(heights) >= 9, heights  # was about 4 px
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.locator("#dash-charts").screenshot(
                path=str(SCREENSHOTS / f"charts-phone-{scheme}.png")
            )
    page.emulate_media(color_scheme="light")
    assert page.locator("#chart-renewals .chart-svg-full").is_visible()
    assert not page.locator("#chart-renewals .chart-svg-compact").is_visible()
    check_page(page, "charts-phone-labels")


def test_certificate_form_in_plain_words(new_page: NewPage, two_certificates: Any) -> None:
    page = new_page()
    login(page, "operator")
    page.goto("/new-certificate/")
    page.fill("#id_name", "words")
    page.fill("#id_duration", "10 days")
    page.fill("#id_renew_before", "20 days")
    page.click("#new-certificate button[type=submit]")
    errors = page.locator(".errorlist").all_inner_texts()
    text = " ".join(errors)
    assert "enter at least one DNS name (or a common name)" in text, errors
    assert "must be less than lifetime (20 days >= 10 days)" in text, errors
    assert "spec." not in text and "dnsNames" not in text
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        shoot(page, "certificate-form-errors", scheme)
    page.emulate_media(color_scheme="light")
    check_page(page, "certificate-form-errors")
    assert not Certificate.objects.filter(name="words").exists()


def test_notification_inputs_match_the_other_fields(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    page = new_page()
    login(page, "admin")
    page.goto("/notifications/")
    height = "(s) => document.querySelector(s).getBoundingClientRect().height"
    name = page.evaluate(height, "#new-rule-form input[name=name]")
    threshold = page.evaluate(height, "#new-rule-form input[name=threshold]")
    url = page.evaluate(height, "#new-channel-form input[name=url]")
    assert name >= 30 and abs(threshold - name) < 1 and abs(url - name) < 1, (name, threshold, url)
    assert page.input_value("#new-rule-form input[name=threshold]") == ""
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        page.locator("#new-rule-form").screenshot(
            path=str(SCREENSHOTS / f"notifications-rule-form-{scheme}.png")
        )
