"""Download tokens on a certificate's page, in a real Chromium against the real app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import DownloadToken, Secret
from tests.browser.a11y import check_page
from tests.browser.pages import login
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.helpers import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]


def test_operator_creates_uses_and_revokes_a_download_token(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    make_certificate("shop", make_selfsigned_issuer("dl-ca"))
    page = new_page()
    login(page, "operator")
    page.goto("/certificates/shop/")
    page.get_by_role("link", name="Download tokens").click()
    page.wait_for_url("**/certificates/shop/downloads/")
    check_page(page, "download-tokens")
    page.fill("#new-download-token-form input[name=name]", "shop nginx")
    page.click("#new-download-token-form button[type=submit]")
    text = page.locator("#token-text").inner_text().strip()
    assert len(text) >= 43
    check_page(page, "download-token-created")

    wait_for(
        lambda: Secret.objects.filter(name="shop-tls").exclude(tls_crt="").exists(),
        what="the worker issues shop",
    )
    api = new_page().request  # no session: the token alone
    auth = {"Authorization": f"Bearer {text}"}
    answer = api.get("/download/shop/tls.crt", headers=auth)
    assert answer.status == 200 and answer.text().startswith("-----BEGIN CERTIFICATE-----")
    page.goto("/certificates/shop/downloads/")
    assert text not in page.content()
    assert (
        "never" not in page.locator("#download-token-table tr", has_text="shop nginx").inner_text()
    )
    page.get_by_role("button", name="Revoke shop nginx").click()
    page.wait_for_url("**/certificates/shop/downloads/")
    assert "revoked" in page.locator("#download-token-table tr", has_text="shop nginx").inner_text()
    assert api.get("/download/shop/tls.crt", headers=auth).status == 401
    assert DownloadToken.objects.get().revoked_at is not None

    viewer = new_page()
    login(viewer, "viewer")
    assert viewer.goto("/certificates/shop/downloads/").status == 403
