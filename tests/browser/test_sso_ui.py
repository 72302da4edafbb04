"""Single sign-on in a real Chromium: the console (`manage.py serve`) against a real OpenID
Provider (node-oidc-provider, tests/oidc/provider.mjs) with its own login and consent pages.

The provider misbehaves on request (a Koa middleware re-signs or rewrites the ID token) so
that each refusal is seen as a person sees it: a page saying why, never a 500, and an entry
in the audit log."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from django.contrib.auth.models import User

from issuance.access.apitokens import create_token
from issuance.models import Event, OidcIdentity, RoleScope
from tests.browser.a11y import check_page
from tests.browser.pages import RECORD_VIOLATIONS, login
from tests.e2e.servers import free_port
from tests.factories import make_cluster
from tests.oidc.provider import ACCOUNTS, RunningProvider, running_provider

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]

NewPage = Callable[..., Any]
RULES = "console-admins=admin; ops=operator; contractors=viewer@prod/team-a"
OUTSIDE = re.compile(r"^https?://(?!127\.0\.0\.1[:/]|localhost[:/])")


def _console_with_provider(
    start_server: Callable[..., str], tmp_path: Path, **env: str
) -> Iterator[tuple[str, RunningProvider]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running_provider(tmp_path, [base]) as provider:
        start_server(
            port=port, env=provider.console_env(OIDC_GROUP_ROLES=RULES, **env), worker=False
        )
        yield base, provider


@pytest.fixture
def sso(start_server: Callable[..., str], tmp_path: Path) -> Iterator[tuple[str, RunningProvider]]:
    yield from _console_with_provider(start_server, tmp_path)


@pytest.fixture
def sso_only(
    start_server: Callable[..., str], tmp_path: Path
) -> Iterator[tuple[str, RunningProvider]]:
    yield from _console_with_provider(start_server, tmp_path, LOCAL_LOGIN="0")


def _page(new_page: NewPage, base: str) -> Any:
    page = new_page(base)
    page.add_init_script(RECORD_VIOLATIONS)
    # The provider's own pages @import a web font: nothing leaves this machine.
    page.route(OUTSIDE, lambda route: route.abort())
    return page


def _through_provider(page: Any, login: str) -> None:
    """From the console's login page through the provider's login and consent pages, as the
    provider's account whose preferred_username is `login`."""
    page.goto("/login/")
    page.get_by_role("link", name="Sign in with Test IdP").click()
    page.wait_for_url(re.compile(r"//localhost:\d+/interaction/"))
    page.fill("input[name=login]", ACCOUNTS[login]["sub"])  # the provider's login is the sub
    page.fill("input[name=password]", "any password")
    page.get_by_role("button", name="Sign-in").click()
    page.get_by_role("button", name="Continue").click()


def _refusals(reason: str) -> int:
    return Event.objects.filter(kind="SignIn", reason=reason).count()


def test_signs_in_through_the_provider_with_the_mapped_role_and_signs_out_there(
    sso: tuple[str, RunningProvider], new_page: NewPage, tmp_path: Path
) -> None:
    base, provider = sso
    page = _page(new_page, base)
    page.goto("/login/")
    check_page(page, "login-with-sso")
    _through_provider(page, "alice")
    page.wait_for_url(f"{base}/")
    assert page.locator("h1").inner_text() == "Dashboard"
    assert page.get_by_role("link", name="Users").is_visible()  # admin, from console-admins

    alice = User.objects.get(username="alice")
    assert set(alice.groups.values_list("name", flat=True)) == {"admin"}
    assert not alice.has_usable_password()
    identity = OidcIdentity.objects.get(user=alice)
    assert identity.subject == ACCOUNTS["alice"]["sub"]
    assert identity.issuer == provider.issuer
    assert Event.objects.filter(kind="SignIn", reason="SignedIn", name="alice").exists()
    assert Event.objects.filter(kind="SignIn", reason="SsoSignedIn", name="alice").exists()
    assert Event.objects.filter(kind="User", reason="UserCreated", name="alice").exists()

    # Sign-out ends the provider's session too (RP-initiated logout): after POST /logout/
    # the browser is on the provider's confirmation page, which sends it back to /login/.
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url(re.compile(r"//localhost:\d+/session/end"))
    assert page.evaluate("window.cspViolations") == []
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(re.compile(re.escape(f"{base}/login/") + r"(\?|$)"))
    assert Event.objects.filter(kind="SignIn", reason="SignedOut", name="alice").exists()
    # The provider forgot alice: signing in again asks for her login.
    page.get_by_role("link", name="Sign in with Test IdP").click()
    page.wait_for_url(re.compile(r"//localhost:\d+/interaction/"))
    assert page.locator("input[name=login]").is_visible()

    # The provider switches to a new signing key: the console fetches its keys again.
    reads = provider.jwks_reads()
    provider.set_mode("rotated")
    again = _page(new_page, base)
    _through_provider(again, "alice")
    again.wait_for_url(f"{base}/")
    assert again.locator("h1").inner_text() == "Dashboard"
    assert provider.jwks_reads() > reads


def test_roles_follow_the_groups_at_every_sign_in(
    sso: tuple[str, RunningProvider], new_page: NewPage, role_users: dict[str, User]
) -> None:
    base, _provider = sso
    make_cluster("prod")
    page = _page(new_page, base)
    _through_provider(page, "nadia")  # contractors: viewer limited to prod/team-a
    page.wait_for_url(f"{base}/")
    nadia = User.objects.get(username="nadia")
    assert set(nadia.groups.values_list("name", flat=True)) == {"viewer"}
    assert list(RoleScope.objects.filter(user=nadia).values_list("cluster__name", "namespace")) == [
        ("prod", "team-a")
    ]

    # An admin changes the console's rules on Users → Single sign-on (audited); the change
    # applies at nadia's next sign-in.
    admin = _page(new_page, base)
    login(admin, "admin")  # a local admin: with the second factor REQUIRE_2FA asks of them
    admin.goto("/users/sso/")
    check_page(admin, "sso-rules")
    assert "contractors=viewer@prod/team-a" in admin.locator("#environment-rules").inner_text()
    admin.fill("#rules-form textarea", "everyone=approver\nnobody=admn")
    admin.get_by_role("button", name="Save rules").click()
    assert "unknown role 'admn'" in admin.locator("#rules-errors").inner_text()
    admin.fill("#rules-form textarea", "everyone=approver")
    admin.get_by_role("button", name="Save rules").click()
    assert "Group rules saved" in admin.content()
    assert Event.objects.filter(reason="GroupMappingChanged", actor="admin").exists()

    again = _page(new_page, base)
    _through_provider(again, "nadia")
    again.wait_for_url(f"{base}/")
    nadia.refresh_from_db()
    # everyone=approver is unlimited, so nadia is no longer limited to prod/team-a.
    assert set(nadia.groups.values_list("name", flat=True)) == {"viewer", "approver"}
    assert not RoleScope.objects.filter(user=nadia).exists()
    assert OidcIdentity.objects.filter(user=nadia).count() == 1

    # The sign-out page that sends the browser on to the provider, held still to check it
    # (a 204 answer to a navigation leaves the page where it is).
    again.route(re.compile(r"/session/end"), lambda route: route.fulfill(status=204))
    again.get_by_role("button", name="Log out").click()
    again.locator("#provider-logout").wait_for()
    assert again.locator("h1").inner_text() == "Signed out"
    check_page(again, "sso-signed-out")
    assert again.goto("/").url.startswith(f"{base}/login/")  # the console's session ended


def test_refusals_each_have_a_page_and_an_audit_entry(
    sso: tuple[str, RunningProvider], new_page: NewPage
) -> None:
    base, provider = sso
    cases = {
        "wrong-aud": "aud",
        "bad-signature": "signature",
        "expired": "expired",
        "nonce": "nonce",
    }
    for mode, words in cases.items():
        provider.set_mode(mode)
        before = _refusals("SsoRefusedToken")
        page = _page(new_page, base)
        _through_provider(page, "olga")
        page.wait_for_url(re.compile(r"/login/sso/callback/"))
        assert page.locator("h1").inner_text() == "Sign-in refused", mode
        message = page.locator("#sso-error").inner_text()
        assert words in message.lower(), (mode, message)
        assert _refusals("SsoRefusedToken") == before + 1, mode
        assert not User.objects.filter(username="olga").exists(), mode
    check_page(page, "sso-refused")
    provider.set_mode("normal")

    # A user whose groups give no role: refused, and no account is made.
    page = _page(new_page, base)
    _through_provider(page, "zoe")
    page.wait_for_url(re.compile(r"/login/sso/callback/"))
    assert "None of your groups gives a role" in page.locator("#sso-error").inner_text()
    assert _refusals("SsoRefusedNoRole") == 1
    assert not User.objects.filter(username="zoe").exists()

    # A local account named like the provider's user, not linked to it: refused.
    User.objects.create_user("bob", password="local-bob-password")
    page = _page(new_page, base)
    _through_provider(page, "bob")
    page.wait_for_url(re.compile(r"/login/sso/callback/"))
    assert "not linked" in page.locator("#sso-error").inner_text()
    assert _refusals("SsoRefusedUsernameTaken") == 1
    assert not OidcIdentity.objects.exists()

    # Replayed state: the provider's answer used twice (the first use signed olga in).
    page = _page(new_page, base)
    callbacks: list[str] = []
    page.on(
        "request",
        lambda request: (
            callbacks.append(request.url) if "/login/sso/callback/" in request.url else None
        ),
    )
    _through_provider(page, "olga")
    page.wait_for_url(f"{base}/")
    before = _refusals("SsoRefusedToken")
    replay = page.goto(callbacks[0])
    assert replay is not None and replay.status == 403
    assert "state" in page.locator("#sso-error").inner_text()
    # Missing state: a forged callback.
    forged = page.goto("/login/sso/callback/?code=forged")
    assert forged is not None and forged.status == 403
    assert "state" in page.locator("#sso-error").inner_text()
    assert _refusals("SsoRefusedToken") == before + 2
    # Every refusal counted as a failed sign-in in the shared lock, as a wrong password.
    assert Event.objects.filter(kind="SignIn", reason="SignInFailed").count() >= 8


def test_local_sign_in_turned_off_leaves_the_provider_and_existing_tokens(
    sso_only: tuple[str, RunningProvider], new_page: NewPage, role_users: dict[str, User]
) -> None:
    base, _provider = sso_only
    _, token = create_token(role_users["viewer"], "before SSO only", actor="viewer")
    page = _page(new_page, base)
    page.goto("/login/")
    assert page.locator("input[name=password]").count() == 0
    assert page.get_by_role("link", name="Sign in with Test IdP").is_visible()
    check_page(page, "login-sso-only")

    answer = requests.post(
        f"{base}/api/v1/token/", data={"username": "viewer", "password": "pw-viewer"}, timeout=10
    )
    assert answer.status_code == 403
    assert "LOCAL_LOGIN=0" in answer.json()["detail"]
    listed = requests.get(
        f"{base}/api/v1/certificates/", headers={"Authorization": f"Token {token}"}, timeout=10
    )
    assert listed.status_code == 200

    _through_provider(page, "olga")
    page.wait_for_url(f"{base}/")
    assert set(User.objects.get(username="olga").groups.values_list("name", flat=True)) == {
        "operator"
    }
