"""Second factor pages: the code page of a sign-in, setting up an authenticator (QR code and
the secret as text), recovery codes shown once, the account page, and an admin's reset.

The rules are in issuance/access/two_factor.py; the order of a sign-in's steps in
console/signin_steps.py. Wrong codes on the code page are failed sign-ins for django-axes
(user_login_failed): they count toward the same lock as wrong passwords on every form.
"""

from __future__ import annotations

import io
from urllib.parse import urlencode

import segno
from axes.handlers.proxy import AxesProxyHandler
from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_POST
from django_otp import login as otp_login

from console import signin_steps
from console.signin_protection import lockout_response
from console.web.access import permission_required, render_page
from issuance.access import two_factor

# Recovery codes waiting to be shown once (the page after enrolment or a new set): the POST
# puts them here, the GET that follows takes them out, so a reload does not show them again.
# Sealed (encrypted with KEY_ENCRYPTION_KEY): sessions are rows in the database too.
RECOVERY_CODES = "_console_recovery_codes"


class CodeForm(forms.Form):
    code = forms.CharField(
        label="Code",
        max_length=32,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "autocapitalize": "off", "spellcheck": "false"}
        ),
    )


class SetupForm(forms.Form):
    code = forms.CharField(
        label="Code from the app",
        max_length=6,
        min_length=6,
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "pattern": "[0-9]{6}"}
        ),
        help_text="The six digits the app shows for Issuance Console.",
    )


def _with_next(url: str, request: HttpRequest) -> str:
    return f"{url}?{urlencode({'next': signin_steps.safe_next(request)})}"


# -- the code page of a sign-in -------------------------------------------------------------


@sensitive_post_parameters("code")
@never_cache
@login_required
def signin_verify(request: HttpRequest) -> HttpResponse:
    user = request.user
    if signin_steps.VERIFY not in signin_steps.pending(request.session):
        return HttpResponseRedirect(signin_steps.safe_next(request))
    if not two_factor.has_factor(user):  # reset by an admin since the password was checked
        return signin_steps.complete(request, signin_steps.VERIFY)
    credentials = {"username": user.get_username()}
    form = CodeForm(request.POST or None)
    status = 200
    if request.method == "POST":
        # A locked account or address is refused before the code is checked, as a password is.
        if AxesProxyHandler.is_locked(request, credentials):
            signin_steps.abandon(request)
            return lockout_response(request, None, credentials)
        verified = two_factor.verify(user, form.data.get("code", "")) if form.is_valid() else None
        if verified is not None:
            otp_login(request, verified[1])
            if verified[0] == "recovery":
                left = two_factor.recovery_codes_left(user)
                messages.warning(
                    request,
                    f"You signed in with a recovery code; {left} left. Make new ones on your "
                    "account's security page if you are running out.",
                )
            return signin_steps.complete(request, signin_steps.VERIFY)
        user_login_failed.send(sender=__name__, credentials=credentials, request=request)
        if getattr(request, "axes_locked_out", False):
            # This failure reached the limit: the half-done sign-in ends (the lock's answer
            # comes from the axes middleware).
            signin_steps.abandon(request)
            return lockout_response(request, None, credentials)
        if not form.errors:
            form.add_error("code", "That code is not right (or was used already). Try again.")
        status = 400
    return render(
        request,
        "registration/otp_verify.html",
        {"form": form, "next": signin_steps.safe_next(request), "signin_pending": True},
        status=status,
    )


# -- setting up a factor --------------------------------------------------------------------


@sensitive_post_parameters("code")
@never_cache
@permission_required("account", "change")
def setup(request: HttpRequest) -> HttpResponse:
    user = request.user
    if two_factor.has_factor(user):
        messages.info(request, "You have a second factor already; an admin can reset it.")
        return redirect("web:account-security")
    device = two_factor.pending_device(user)
    form = SetupForm(request.POST or None)
    status = 200
    if request.method == "POST":
        codes = (
            two_factor.confirm_enrolment(user, device, form.data.get("code", ""))
            if (form.is_valid())
            else None
        )
        if codes is not None:
            otp_login(request, device)
            request.session[RECOVERY_CODES] = two_factor.seal_codes(codes)
            signin_steps.finish(request, signin_steps.ENROL)
            return HttpResponseRedirect(_with_next(reverse("web:recovery-codes"), request))
        if form.is_valid():
            form.add_error("code", "That code does not match: check the app's clock, and retry.")
        status = 400
    return render_page(
        request,
        "registration/otp_setup.html",
        {
            "form": form,
            "manual_key": two_factor.manual_key(device),
            "required": two_factor.must_have_factor(user),
            "during_signin": signin_steps.ENROL in signin_steps.pending(request.session),
            "signin_pending": bool(signin_steps.pending(request.session)),
            "next": signin_steps.safe_next(request),
        },
        status=status,
    )


@never_cache
@permission_required("account", "change")
def setup_qr(request: HttpRequest) -> HttpResponse:
    """The QR code of the set-up in progress, as an SVG image (dark on white in either colour
    scheme, so any camera reads it)."""
    device = two_factor.pending_device(request.user)
    if device.confirmed:
        raise Http404
    out = io.BytesIO()
    segno.make(device.config_url, error="m").save(
        out, kind="svg", scale=6, border=4, dark="#000", light="#fff", xmldecl=False
    )
    svg = out.getvalue()
    return HttpResponse(svg, content_type="image/svg+xml")


@never_cache
@permission_required("account", "read")
def recovery_codes(request: HttpRequest) -> HttpResponse:
    codes = two_factor.unseal_codes(request.session.pop(RECOVERY_CODES, None))
    if not codes:
        messages.info(request, "Recovery codes are shown once only; you can make new ones here.")
        return redirect("web:account-security")
    return render_page(
        request,
        "registration/otp_recovery_codes.html",
        {"codes": codes, "next": signin_steps.safe_next(request)},
    )


@require_POST
@never_cache
@permission_required("account", "change")
def recovery_codes_new(request: HttpRequest) -> HttpResponse:
    if not two_factor.has_factor(request.user):
        messages.error(request, "Set up a second factor first.")
        return redirect("web:account-security")
    request.session[RECOVERY_CODES] = two_factor.seal_codes(
        two_factor.new_recovery_codes(request.user)
    )
    return redirect("web:recovery-codes")


@never_cache
@permission_required("account", "read")
def account_security(request: HttpRequest) -> HttpResponse:
    user = request.user
    return render_page(
        request,
        "console/account_security.html",
        {
            "has_factor": two_factor.has_factor(user),
            "codes_left": two_factor.recovery_codes_left(user),
            "required": two_factor.must_have_factor(user),
            "policy": two_factor.policy(),
        },
    )


# -- admins ---------------------------------------------------------------------------------


@require_POST
@permission_required("user", "reset-second-factor")
def reset(request: HttpRequest, pk: int) -> HttpResponse:
    """An admin removes a user's factor (a lost phone); they set one up at the next sign-in."""
    user = get_object_or_404(User, pk=pk)
    two_factor.reset(user.pk, actor=request.user.get_username())
    messages.success(
        request,
        f"Second factor of {user.username} reset: they set up a new one at their next sign-in"
        + ("." if two_factor.must_have_factor(user) else " if they choose to."),
    )
    return redirect("web:users")
