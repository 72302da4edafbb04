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
