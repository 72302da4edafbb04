"""Steps a browser test takes on the console's pages."""

from __future__ import annotations

import re
from typing import Any


def login(page: Any, username: str) -> None:
    """Sign in through the login form as a user made with the password `pw-<username>`."""
    page.goto("/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-" + username)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))


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
