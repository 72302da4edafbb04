"""The steps a sign-in owes after the password, and the gate that holds a user to them.

At a password sign-in (user_logged_in with a real request) the session gets the steps this
user still has to take, in order:

- `verify`: the user has a second factor: its code, or a recovery code (/login/verify/);
- `password`: an admin created the user or reset their password: choose one
  (/account/password/);
- `enrol`: REQUIRE_2FA asks this user for a factor and they have none: set one up
  (/account/two-factor/setup/).

Until the list is empty, every console page redirects to the first step (keeping where the
user was going in `next`), session-authenticated API calls are treated as anonymous (API
tokens are unaffected), and the live WebSocket refuses the session (console/consumers.py).
The list is read from the session the authentication middleware loaded already: a signed-in
page costs no query for it.

A session without the list (the test client's force_login(), a session made before this
existed) has nothing pending.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth import logout
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.signals import user_logged_in
from django.http import HttpRequest, HttpResponseBase, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from issuance.access import passwords, two_factor

STEPS = "_console_signin_steps"
VERIFY = "verify"
PASSWORD = "password"  # noqa: S105 - a step's name, not a secret
ENROL = "enrol"

# The pages of each step (URL names in console/web/urls.py); the first is where the gate sends
# the user.
STEP_PAGES = {
    VERIFY: ("web:signin-verify",),
    PASSWORD: ("web:password-change",),
    ENROL: ("web:two-factor-setup", "web:two-factor-qr"),
}
# Reachable whatever is pending: signing out, and what needs no session.
_ALWAYS = ("web:logout", "web:login")
_OUTSIDE_CONSOLE = ("/static/", "/.well-known/", "/crl/", "/download/", "/metrics")


def steps_for(user: Any) -> list[str]:
    steps: list[str] = []
    if two_factor.has_factor(user):
        steps.append(VERIFY)
    if passwords.must_change(user):
        steps.append(PASSWORD)
    if VERIFY not in steps and two_factor.must_have_factor(user):
        steps.append(ENROL)
    return steps


def pending(session: Any) -> list[str]:
    steps = session.get(STEPS) if session is not None else None
    return [str(step) for step in steps] if isinstance(steps, list) else []


def _on_logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # The test client's force_login() builds a bare request (no path): not a sign-in.
    if request is None or not getattr(request, "path", "") or not hasattr(request, "session"):
        return
    steps = steps_for(user)
    if steps:
        request.session[STEPS] = steps
    else:
        request.session.pop(STEPS, None)


def connect() -> None:
    user_logged_in.connect(_on_logged_in, dispatch_uid="console.signin_steps.logged_in")


def safe_next(request: HttpRequest) -> str:
    """Where the user was going (`next`, same host only), else the dashboard."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return str(settings.LOGIN_REDIRECT_URL)


def redirect_to_step(request: HttpRequest, step: str, target: str) -> HttpResponseRedirect:
    return HttpResponseRedirect(f"{reverse(STEP_PAGES[step][0])}?{urlencode({'next': target})}")


def finish(request: HttpRequest, step: str) -> None:
    """The step is done (the page that follows is the view's own)."""
    steps = [s for s in pending(request.session) if s != step]
    if steps:
        request.session[STEPS] = steps
    else:
        request.session.pop(STEPS, None)


def complete(request: HttpRequest, step: str) -> HttpResponseRedirect:
    """The step is done: on to the next one, or to where the user was going."""
    steps = [s for s in pending(request.session) if s != step]
    if steps:
        request.session[STEPS] = steps
        return redirect_to_step(request, steps[0], safe_next(request))
    request.session.pop(STEPS, None)
    return HttpResponseRedirect(safe_next(request))


def none_for_single_sign_on(request: HttpRequest) -> None:
    """A sign-in through the OpenID Provider owes no step: the provider asked for its own
    second factor, and the account has no password here (docs/sso.md)."""
    request.session.pop(STEPS, None)


def abandon(request: HttpRequest) -> None:
    """Ends a half-done sign-in (a lock reached on the code page)."""
    logout(request)


class SignInStepsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self._allowed: dict[str, frozenset[str]] | None = None

    def _pages(self) -> dict[str, frozenset[str]]:
        # Reversed once (the URLconf is fixed after start-up).
        if self._allowed is None:
            always = {reverse(name) for name in _ALWAYS}
            self._allowed = {
                step: frozenset(always | {reverse(name) for name in names})
                for step, names in STEP_PAGES.items()
            }
        return self._allowed

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        steps = pending(getattr(request, "session", None))
        if steps and not request.path.startswith(_OUTSIDE_CONSOLE):
            if not request.user.is_authenticated:
                request.session.pop(STEPS, None)
            elif request.path.startswith("/api/") and not request.path.startswith("/api/docs/"):
                # Session authentication sees no one until the sign-in is complete; a request
                # with an API token still authenticates by its token.
                request.user = AnonymousUser()
            elif request.path not in self._pages()[steps[0]]:
                return redirect_to_step(request, steps[0], request.get_full_path())
        return self.get_response(request)
