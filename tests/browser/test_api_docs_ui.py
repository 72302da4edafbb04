"""The API reference (/api/docs/) in Chromium, under the console's own Content-Security-Policy
header (console/settings.py: no inline script or style): Swagger UI renders the operations
from our schema, and a write tried from it with the session (CSRF token in its header) is
made, with no CSP violation."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import ApiToken
from tests.browser.pages import RECORD_VIOLATIONS, login

pytestmark = pytest.mark.browser


def test_reference_renders_and_tries_a_write_under_a_strict_csp(
    new_page: Callable[..., Any], role_users: dict[str, User]
) -> None:
    page = new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    page.add_init_script(RECORD_VIOLATIONS)
    login(page, "viewer")
    with page.expect_response("**/api/docs/") as answer:
        page.click("nav.mainnav >> text=API")
    page.wait_for_url("**/api/docs/")
    # The server's own header, as the browser received it: scripts and styles from our
    # origin only, no 'unsafe-inline'.
    csp = answer.value.all_headers()["content-security-policy"]
    # django-csp does not keep the directives' order: read them as a set.
    directives = {d.strip() for d in csp.split(";")}
    assert {"script-src 'self'", "style-src 'self'"} <= directives, csp
    assert "unsafe-inline" not in csp

    page.locator("#operations-tag-certificates").wait_for()
    assert page.locator("#operations-certificates-v1_certificates_list").is_visible()

    create = page.locator("#operations-tokens-v1_tokens_create")
    create.locator(".opblock-summary-control").click()
    create.locator("button.try-out__btn").click()
    create.locator("textarea.body-param__text").fill(json.dumps({"name": "from-the-docs"}))
    create.locator("button.execute").click()
    status = create.locator(".live-responses-table tbody .response-col_status")
    status.wait_for()
    assert status.inner_text().strip() == "201"
    assert ApiToken.objects.filter(user=role_users["viewer"], name="from-the-docs").exists()

    assert page.evaluate("window.cspViolations") == []
    assert errors == []
