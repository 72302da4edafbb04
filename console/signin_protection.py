"""The web side of sign-in protection (issuance/access/signin.py): django-axes' answer to a locked
sign-in, and the receivers that put sign-ins, failures, locks and sign-outs in the audit log."""

from __future__ import annotations

import math
from typing import Any

from axes.backends import AxesStandaloneBackend
from axes.helpers import get_client_username
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from issuance.access import signin

client_address = signin.client_address


class LockingBackend(AxesStandaloneBackend):  # type: ignore[misc]
    """django-axes' backend (refuses locked accounts and addresses), first in
    AUTHENTICATION_BACKENDS. Every sign-in over HTTP passes its request to authenticate() (the
    login page, the token endpoint, /admin/); a call without one (a management command, the
    test client's login()) has no address to lock, and axes would raise: it passes through
    to the password check."""

    def authenticate(self, request: Any, *args: Any, **kwargs: Any) -> None:
        if request is None:
            return None
        return super().authenticate(request, *args, **kwargs)  # type: ignore[no-any-return]


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None, credentials: Any = None
) -> HttpResponse:
    """429 with Retry-After: JSON under /api/, else the login page saying the account or
    address is locked (the same whether or not the password was right: it was never checked)."""
    username = get_client_username(request, credentials)
    left = signin.lock_remaining(username, signin.client_address(request))
    seconds = max(math.ceil(left.total_seconds()), 1)
    minutes = max(math.ceil(seconds / 60), 1)
    message = (
        "Too many failed sign-ins: this account or this address is locked. "
        f"Try again in {minutes} min, or ask an admin to lift the lock."
    )
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": message}, status=429)
    else:
        form = AuthenticationForm(request, initial={"username": username or ""})
        context = {"form": form, "locked_message": message, "next": request.POST.get("next", "")}
        response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(seconds)
    return response


def _on_logged_in(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    # The test client's force_login() builds a bare request (no path): not a sign-in.
    if request is not None and request.path:
        signin.signed_in(request, user.get_username())


def _on_logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    if request is not None and user is not None:
        signin.signed_out(request, user.get_username())


def _on_login_failed(
    sender: Any, credentials: dict[str, Any], request: Any = None, **kw: Any
) -> None:
    # Django has already replaced the password in `credentials`; only the username is read.
    if request is not None:
        signin.failed(request, str(credentials.get("username") or ""))


def connect() -> None:
    """Called from ConsoleConfig.ready(), after django-axes' receivers (its app comes first
    in INSTALLED_APPS), so a failure is counted before it is recorded."""
    user_logged_in.connect(_on_logged_in, dispatch_uid="console.signin_protection.logged_in")
    user_logged_out.connect(_on_logged_out, dispatch_uid="console.signin_protection.logged_out")
    user_login_failed.connect(
        _on_login_failed, dispatch_uid="console.signin_protection.login_failed"
    )
