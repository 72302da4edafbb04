"""Second factor and password change in a real Chromium against the real app (`manage.py
serve`, default settings: REQUIRE_2FA=admins). Codes come from pyotp, from the key the set-up
page writes out, as an authenticator app would make them."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.access import two_factor
from issuance.models import Event
from tests.browser.a11y import DESKTOP, PHONE, check_page, shoot, viewport
from tests.browser.pages import (
    after_password,
    login,
    set_up_second_factor,
    totp_code,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

NewPage = Callable[[], Any]


def dark_shots(page: Any, name: str) -> None:
    """The dark scheme at both sizes, beside check_page's light ones, to look at by eye."""
    page.emulate_media(color_scheme="dark")
    for label, size in (("desktop-dark", DESKTOP), ("phone-dark", PHONE)):
        with viewport(page, size):
            shoot(page, name, label)
    page.emulate_media(color_scheme="light")


def password_step(page: Any, username: str) -> str:
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", f"pw-{username}")
    page.click("button[type=submit]")
    return after_password(page)


def sign_out(page: Any) -> None:
    page.click("form[action='/logout/'] button")
    page.wait_for_url(re.compile(r"/login/$"))


def verify(page: Any, code: str) -> None:
    page.fill("#otp-verify input[name=code]", code)
    page.click("#otp-verify button[type=submit]")
    page.wait_for_load_state()


@pytest.fixture
def users(role_users: dict[str, User]) -> Iterator[dict[str, User]]:
    yield role_users


def test_enrol_sign_in_with_code_and_recovery_code_and_admin_reset(
    new_page: NewPage, users: dict[str, User]
) -> None:
    admin = new_page()
    # The first sign-in of an admin with no factor continues on the set-up page.
    assert password_step(admin, "admin") == "/account/two-factor/setup/"
    assert admin.locator("img[src='/account/two-factor/qr.svg']").evaluate(
        "img => img.complete && img.naturalWidth > 0"
    )
    check_page(admin, "two-factor-setup")
    dark_shots(admin, "two-factor-setup")
    # Other pages wait until the factor is set up.
    admin.goto("/certificates/")
    assert admin.url.endswith("/account/two-factor/setup/?next=%2Fcertificates%2F")
    codes = set_up_second_factor(admin)
    assert len(codes) == two_factor.RECOVERY_CODE_COUNT
    check_page(admin, "two-factor-recovery-codes")
    dark_shots(admin, "two-factor-recovery-codes")
    admin.click("#recovery-continue")
    admin.wait_for_url(re.compile(r"/certificates/$"))
    # Shown once: back on the codes' address, they are gone.
    admin.goto("/account/two-factor/recovery-codes/")
    assert admin.url.endswith("/account/security/")
    assert codes[0] not in admin.content()
    check_page(admin, "account-security")
    sign_out(admin)

    # Sign in with the app's code.
    assert password_step(admin, "admin") == "/login/verify/"
    check_page(admin, "two-factor-verify")
    dark_shots(admin, "two-factor-verify")
    verify(admin, totp_code("admin"))
    admin.wait_for_url(re.compile(r"/$"))
    assert admin.locator("h1").inner_text() == "Dashboard"
    sign_out(admin)

    # With a recovery code, which is then used up.
    assert password_step(admin, "admin") == "/login/verify/"
    verify(admin, codes[0])
    admin.wait_for_url(re.compile(r"/$"))
    assert "recovery code" in admin.locator(".messages").inner_text()
    sign_out(admin)
    assert password_step(admin, "admin") == "/login/verify/"
    verify(admin, codes[0])
    assert admin.url.split("?")[0].endswith("/login/verify/")
    assert "not right" in admin.locator("#code-error").inner_text()
    check_page(admin, "two-factor-verify-error")
    admin.click("text=Cancel and log out")
    admin.wait_for_url(re.compile(r"/login/$"))

    # An operator sets up a factor of their own choosing (not required of them)...
    operator = new_page()
    login(operator, "operator")
    operator.click("a.account-link")
    operator.click("text=Set up a second factor")
    set_up_second_factor(operator)
    operator.click("#recovery-continue")
    assert two_factor.has_factor(users["operator"])

    # ...loses the phone; an admin resets it from the Users page.
    login(admin, "admin")
    admin.goto("/users/")
    admin.get_by_role("button", name="Reset second factor of operator").click()
    admin.wait_for_url(re.compile(r"/users/$"))
    assert "Second factor of operator reset" in admin.locator(".messages").inner_text()
    assert not two_factor.has_factor(users["operator"])
    assert Event.objects.filter(name="operator", reason=two_factor.RESET, actor="admin").exists()
    # The operator's next sign-in needs the password only.
    other = new_page()
    assert password_step(other, "operator") == "/"


def test_password_change_page(new_page: NewPage, users: dict[str, User]) -> None:
    page = new_page()
    login(page, "viewer")
    page.click("a.account-link")
    page.click("text=Change your password")
    page.wait_for_url(re.compile(r"/account/password/$"))
    check_page(page, "password-change")
    dark_shots(page, "password-change")
    page.fill("input[name=old_password]", "pw-viewer")
    page.fill("input[name=new_password1]", "password")
    page.fill("input[name=new_password2]", "password")
    page.click("#password-change button[type=submit]")
    assert "too common" in page.locator(".errorlist").first.inner_text()
    check_page(page, "password-change-errors")
    page.fill("input[name=old_password]", "pw-viewer")
    page.fill("input[name=new_password1]", "a-much-longer-secret-93")
    page.fill("input[name=new_password2]", "a-much-longer-secret-93")
    page.click("#password-change button[type=submit]")
    page.wait_for_url(re.compile(r"/account/security/$"))
    assert "password was changed" in page.locator(".messages").inner_text()
    assert User.objects.get(username="viewer").check_password("a-much-longer-secret-93")
