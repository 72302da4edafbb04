"""Steps a browser test takes on the console's pages."""

from __future__ import annotations

import re
import time
from base64 import b32encode
from typing import Any
from urllib.parse import urlparse

import pyotp

from issuance.models import TOTPFactor


def login(page: Any, username: str) -> None:
    """Sign in through the login form as a user made with the password `pw-<username>`,
    taking the second-factor step the console asks of admins by default (REQUIRE_2FA)."""
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-" + username)
    page.click("button[type=submit]")
    finish_sign_in(page, username)
    page.wait_for_url(re.compile(r"/$"))


def after_password(page: Any) -> str:
    """The path the login form led to (a step of console/signin_steps.py, or the page)."""
    page.wait_for_url(lambda url: urlparse(url).path != "/login/")
    return str(urlparse(page.url).path)


def totp_code(username: str) -> str:
    """The user's authenticator code as an app shows it, never one django-otp has taken
    already (it refuses a reused code; it accepts one 30 s step ahead)."""
    device = TOTPFactor.objects.get(user__username=username, confirmed=True)
    now = int(time.time() // 30)
    step = max(now, int(device.last_t) + 1)
    if step > now + 1:  # two sign-ins used this step and the next: wait for the next one
        time.sleep((now + 1) * 30 - time.time() + 0.5)
    return str(pyotp.TOTP(b32encode(device.bin_key).decode()).at(step * 30))


def set_up_second_factor(page: Any) -> list[str]:
    """On the set-up page: pairs an "app" from the key written out for manual entry, and
    returns the recovery codes the console shows once."""
    key = page.locator("#manual-key").inner_text().replace(" ", "")
    page.fill("#otp-setup input[name=code]", pyotp.TOTP(key).now())
    page.click("#otp-setup button[type=submit]")
    page.wait_for_url(re.compile(r"/account/two-factor/recovery-codes/"))
    return [code.strip() for code in page.locator("#recovery-codes code").all_inner_texts()]


def finish_sign_in(page: Any, username: str) -> None:
    """The steps after the password: the code of the user's factor, or setting one up."""
    path = after_password(page)
    if path == "/login/verify/":
        page.fill("#otp-verify input[name=code]", totp_code(username))
        page.click("#otp-verify button[type=submit]")
    elif path == "/account/two-factor/setup/":
        set_up_second_factor(page)
        page.click("#recovery-continue")


# console-users-charts


def login_with(page: Any, username: str, password: str) -> None:
    """Sign in with an explicit password (a user made in the console, not by a fixture)."""
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))


def csrf_token(page: Any) -> str:
    """The CSRF token of the page's forms (for crafted POSTs with the page's session)."""
    return str(page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value"))


# A page's Content-Security-Policy violations, in window.cspViolations: an init script
# (page.add_init_script), which runs before the page's own scripts and is not subject to the
# CSP.
RECORD_VIOLATIONS = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.cspViolations.push(e.violatedDirective + " " + e.blockedURI);
});
"""
