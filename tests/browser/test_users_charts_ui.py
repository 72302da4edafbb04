"""Users, API tokens and the dashboard's charts in a real Chromium against the real app."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from issuance.models import ApiToken, Certificate, Event
from tests.browser.a11y import check_page
from tests.browser.pages import after_password, csrf_token, login, login_with
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]


def test_admin_creates_user_and_viewer_is_refused(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    admin = new_page()
    login(admin, "admin")
    admin.get_by_role("link", name="Users").click()
    admin.wait_for_url("**/users/")
    admin.fill("#new-user input[name=username]", "dana")
    admin.check("#new-user input[name=roles][value=operator]")
    admin.click("#new-user button[type=submit]")
    password = admin.locator("#one-time-password").inner_text().strip()
    assert len(password) >= 20
    assert admin.locator("tr[data-user=dana]").is_visible()
    check_page(admin, "users-created")
    admin.goto("/users/")  # shown once
    assert admin.locator("#one-time-password").count() == 0
    assert password not in admin.content()

    # A user an admin created chooses their own password before anything else.
    dana = new_page()
    dana.goto("/login/")
    dana.fill("input[name=username]", "dana")
    dana.fill("input[name=password]", password)
    dana.click("button[type=submit]")
    assert after_password(dana) == "/account/password/"
    check_page(dana, "password-change-forced")
    dana.fill("input[name=old_password]", password)
    dana.fill("input[name=new_password1]", "danas-own-secret-2026")
    dana.fill("input[name=new_password2]", "danas-own-secret-2026")
    dana.click("#password-change button[type=submit]")
    dana.wait_for_url(re.compile(r"/$"))
    assert dana.locator("h1").inner_text() == "Dashboard"
    dana.click("form[action='/logout/'] button")
    dana.wait_for_url(re.compile(r"/login/$"))
    login_with(dana, "dana", "danas-own-secret-2026")
    assert list(User.objects.get(username="dana").groups.values_list("name", flat=True)) == [
        "operator"
    ]

    viewer = new_page()
    login(viewer, "viewer")
    assert viewer.get_by_role("link", name="Users").count() == 0  # no admin controls
    token = csrf_token(viewer)
    crafted = viewer.request.post(
        "/users/new/",
        form={"csrfmiddlewaretoken": token, "username": "mallory", "roles": "admin"},
    )
    assert crafted.status == 403
    assert not User.objects.filter(username="mallory").exists()
    assert viewer.goto("/users/").status == 403


def test_user_creates_and_revokes_a_token_and_sees_the_charts(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    issuer = make_selfsigned_issuer("charts-ca")
    now = timezone.now()
    for i in range(6):
        cert = make_certificate(f"chart-{i}", issuer)
        Certificate.objects.filter(pk=cert.pk).update(
            renewal_time=now + timedelta(days=3 + i % 2), not_after=now + timedelta(days=20 * i)
        )
        Event.objects.create(kind="Certificate", name=cert.name, reason="Issued")

    page = new_page()
    login(page, "viewer")
    # The worker issues these certificates meanwhile and live.js redraws the section:
    # waits retry across the redraws.
    for key in ("renewals", "expiry", "issuance"):
        figure = page.locator(f"#chart-{key}")
        # The drawing a desktop shows (renewals and expiry also have a compact one for phones).
        figure.locator("svg.chart-svg-full[role=img] > title").wait_for(state="attached")
        figure.locator("svg.chart-svg-full[role=img] > desc").wait_for(state="attached")
        figure.locator("rect.chart-bar").first.wait_for()
        figure.locator("details.chart-data > summary").wait_for()
    check_page(page, "dashboard-charts")

    page.get_by_role("link", name="viewer").click()  # the user's name leads to their tokens
    page.wait_for_url("**/account/tokens/")
    page.fill("#new-token-form input[name=name]", "laptop")
    page.click("#new-token-form button[type=submit]")
    text = page.locator("#token-text").inner_text().strip()
    assert len(text) >= 43
    check_page(page, "token-created")
    api = new_page().request  # no session: the token alone
    auth = {"Authorization": f"Token {text}"}
    assert api.get("/api/v1/stats/", headers=auth).status == 200
    page.goto("/account/tokens/")
    assert text not in page.content()
    row = page.locator("#token-table tr", has_text="laptop")
    row.get_by_role("button", name="Revoke laptop").click()
    page.wait_for_url("**/account/tokens/")
    assert "revoked" in page.locator("#token-table tr", has_text="laptop").inner_text()
    assert api.get("/api/v1/stats/", headers=auth).status == 401
    assert ApiToken.objects.get(name="laptop").revoked_at is not None
