"""Sign-in through an OpenID Provider (docs/sso.md, decision 0009).

Authlib's Django client does the protocol: discovery from OIDC_ISSUER_URL, the authorization
code flow with PKCE (S256), `state` and `nonce` kept in the session (one use each), the code
exchanged with the client secret, and the ID token's signature checked against the
provider's published keys. The keys are fetched once and fetched again when a token names a
key id they do not hold, so a provider that rotates its signing key keeps working. This
module adds what Authlib leaves to the application: the ID token's audience must be our client
id (Authlib only checks `azp` otherwise), a verified ID token is required, and the claims
become a console user through issuance/access/oidc.py.

Every refusal renders registration/oidc_error.html (never a 500), is in the audit log (kind
SignIn) and counts as a failed sign-in for the address, and for the account once it is
known, in django-axes' locks shared with the password forms (issuance/access/signin.py).
Sign-out also ends the provider's session (RP-initiated logout) for users who came through it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import wraps
from typing import Any, cast

import requests
from authlib.integrations.base_client import OAuthError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth
from axes.handlers.proxy import AxesProxyHandler
from django.conf import settings
from django.contrib.auth import login as auth_login
from django.contrib.auth.models import User
from django.contrib.auth.signals import user_login_failed
from django.http import HttpRequest, HttpResponse, HttpResponseBase, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from joserfc.errors import JoseError

from console import signin_steps
from issuance.access import oidc, signin

log = logging.getLogger("console.web.oidc")
View = Callable[..., HttpResponseBase]

NAME = "oidc"
SESSION_NEXT = "oidc_next"
# The ID token the user signed in with: the provider's logout wants it as id_token_hint.
SESSION_ID_TOKEN = "oidc_id_token"  # noqa: S105 - a session key's name, not a secret
# How long a request to the provider (discovery, keys, token, userinfo) may take.
PROVIDER_TIMEOUT = 10.0

_clients: dict[tuple[str, ...], DjangoOAuth2App] = {}
_clients_lock = threading.Lock()


def enabled() -> bool:
    return bool(settings.OIDC_ENABLED)


def client() -> DjangoOAuth2App:
    """The Authlib client for the configured provider; one per configuration and process,
    so discovery and the keys are fetched once (and the keys again on an unknown key id)."""
    key = (
        settings.OIDC_ISSUER_URL,
        settings.OIDC_CLIENT_ID,
        settings.OIDC_CLIENT_SECRET,
        " ".join(settings.OIDC_SCOPES),
    )
    with _clients_lock:
        found = _clients.get(key)
        if found is None:
            registry = OAuth()
            registry.register(
                NAME,
                client_id=settings.OIDC_CLIENT_ID,
                client_secret=settings.OIDC_CLIENT_SECRET or None,
                server_metadata_url=(
                    settings.OIDC_ISSUER_URL + "/.well-known/openid-configuration"
                ),
                client_kwargs={
                    "scope": " ".join(settings.OIDC_SCOPES),
                    "code_challenge_method": "S256",
                    "default_timeout": PROVIDER_TIMEOUT,
                    # A public client (no secret file) sends its id only; PKCE protects it.
                    "token_endpoint_auth_method": (
                        "client_secret_basic" if settings.OIDC_CLIENT_SECRET else "none"
                    ),
                },
            )
            found = cast(DjangoOAuth2App, registry.create_client(NAME))
            _clients[key] = found
    return found


def _callback_url(request: HttpRequest) -> str:
    return request.build_absolute_uri(reverse("web:oidc-callback"))


def _refuse(
    request: HttpRequest,
    reason: str,
    message: str,
    *,
    username: str = "",
    status: int = 403,
    count: bool = True,
    detail: str = "",
) -> HttpResponse:
    """The refusal page, its audit entry, and a failed sign-in in the shared lock."""
    signin.record(
        reason,
        username or "(single sign-on)",
        f"Single sign-on refused from {signin.client_address(request) or 'an unknown address'}: "
        f"{message}" + (f" ({detail})" if detail else ""),
        warning=True,
    )
    if count:
        # django-axes counts it (address, and account when named) and the console's receiver
        # records SignInFailed with the count, as for a wrong password. No username (the
        # provider named nobody yet): the address alone counts, no account "" is locked.
        credentials = {"username": username or None}
        user_login_failed.send(sender=__name__, credentials=credentials, request=request)
    context = {"message": message, "local_login": settings.LOCAL_LOGIN}
    return render(request, "registration/oidc_error.html", context, status=status)


def _locked(request: HttpRequest, username: str | None = None) -> bool:
    credentials = {"username": username} if username else None
    return bool(AxesProxyHandler.is_locked(request, credentials))


def _refuse_locked(request: HttpRequest) -> HttpResponse:
    return _refuse(
        request,
        signin.REFUSED_LOCKED,
        "Too many failed sign-ins from this address: try again later.",
        status=429,
        count=False,
    )


def _refuse_unreachable(request: HttpRequest, exc: Exception) -> HttpResponse:
    log.warning("OpenID Provider unreachable at sign-in: %s", exc)
    return _refuse(
        request,
        oidc.REFUSED_TOKEN,
        "The sign-in provider cannot be reached; try again later.",
        status=503,
        count=False,
    )


@never_cache
def start(request: HttpRequest) -> HttpResponse:
    """GET /login/sso/: off to the provider (a link, not a form: CSP's form-action 'self'
    would stop a form's redirect to another origin)."""
    if not enabled():
        return redirect("web:login")
    if _locked(request):
        return _refuse_locked(request)
    wanted = request.GET.get("next", "")
    if wanted and url_has_allowed_host_and_scheme(
        wanted, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        request.session[SESSION_NEXT] = wanted
    else:
        request.session.pop(SESSION_NEXT, None)
    try:
        response: HttpResponse = client().authorize_redirect(request, _callback_url(request))
    except (requests.RequestException, ValueError, RuntimeError) as exc:
        return _refuse_unreachable(request, exc)
    return response


def _verified_claims(request: HttpRequest) -> tuple[dict[str, Any], str]:
    """The provider's answer checked (module docstring): the ID token's claims, with the
    userinfo endpoint's added when it has more (groups often live there), and the raw ID
    token. Raises OAuthError, JoseError or ValueError when anything does not hold."""
    app = client()
    issuer = settings.OIDC_ISSUER_URL
    claims_options = {
        "iss": {"essential": True, "values": [app.load_server_metadata().get("issuer", issuer)]},
        "aud": {"essential": True, "values": [settings.OIDC_CLIENT_ID]},
    }
    token = app.authorize_access_token(request, claims_options=claims_options)
    verified = token.get("userinfo")
    if not token.get("id_token") or verified is None:
        raise ValueError("the provider's answer has no ID token")
    claims = dict(verified)
    metadata = app.load_server_metadata()
    wanted = {settings.OIDC_GROUPS_CLAIM, settings.OIDC_USERNAME_CLAIM}
    if not wanted <= claims.keys() and metadata.get("userinfo_endpoint"):
        extra = dict(app.userinfo(token=token))
        if extra.get("sub") != claims.get("sub"):
            raise ValueError("the userinfo endpoint answered for another account")
        claims = {**extra, **claims}
    return claims, str(token["id_token"])


@never_cache
def callback(request: HttpRequest) -> HttpResponse:
    """GET /login/sso/callback/: the provider's answer; signs in or refuses with a page."""
    if not enabled():
        return redirect("web:login")
    if _locked(request):
        return _refuse_locked(request)
    try:
        claims, id_token = _verified_claims(request)
    except requests.RequestException as exc:
        return _refuse_unreachable(request, exc)
    except (OAuthError, JoseError, ValueError, KeyError) as exc:
        detail = _describe(exc)
        return _refuse(request, oidc.REFUSED_TOKEN, f"The provider's answer was refused: {detail}")
    username_hint = str(claims.get(settings.OIDC_USERNAME_CLAIM) or "")
    if _locked(request, username_hint or None):
        return _refuse(
            request,
            signin.REFUSED_LOCKED,
            "Too many failed sign-ins for this account: try again later.",
            username=username_hint,
            status=429,
            count=False,
        )
    try:
        # Linked under the configured issuer URL (what `manage.py oidc_link` takes); the ID
        # token's `iss` was checked against the discovery document's.
        user, grant = oidc.sign_in(
            settings.OIDC_ISSUER_URL,
            claims,
            username_claim=settings.OIDC_USERNAME_CLAIM,
            groups_claim=settings.OIDC_GROUPS_CLAIM,
        )
    except oidc.Refused as refused:
        return _refuse(
            request,
            refused.reason,
            refused.message,
            username=refused.username,
            detail=refused.detail,
        )
    next_url = request.session.pop(SESSION_NEXT, "") or settings.LOGIN_REDIRECT_URL
    # The model backend (last; NoPasswordBackend with LOCAL_LOGIN=0) loads the user of later
    # requests. login() rotates the session key and the user_logged_in receiver records
    # SignedIn (console/signin_protection.py).
    auth_login(request, cast(User, user), backend=settings.AUTHENTICATION_BACKENDS[-1])
    signin_steps.none_for_single_sign_on(request)  # user_logged_in listed a password's steps
    request.session[SESSION_ID_TOKEN] = id_token
    signin.record(
        oidc.SIGNED_IN,
        user.get_username(),
        f"Signed in through {settings.OIDC_PROVIDER_NAME} ({grant.describe()}; groups "
        f"{', '.join(grant.matched) or 'none'}).",
        actor=user.get_username(),
    )
    return HttpResponseRedirect(next_url)


def _describe(exc: Exception) -> str:
    """A short reason for the page and the audit log (never a token)."""
    if isinstance(exc, OAuthError):
        if exc.error == "mismatching_state":
            return "the sign-in state is missing, used already or from another browser"
        return exc.description or exc.error or "the provider refused"
    if isinstance(exc, JoseError):
        return f"the ID token is not valid ({exc.error}: {exc.description or ''})".replace(
            ": )", ")"
        )
    return str(exc)


def provider_logout(view: View) -> View:
    """Wraps the sign-out view (POST, CSRF): after it, a user who came through the provider
    goes on to its end_session_endpoint with id_token_hint and post_logout_redirect_uri, so
    the provider's session ends too, and comes back to the login page.

    Not by a redirect: Chromium applies CSP's form-action 'self' of the page that posted the
    sign-out form to the redirects that follow it, and stops one to the provider. The answer
    is a page with the link to the provider, which console/static/js/sso-logout.js follows at once
    (a script's navigation is not a form's); without scripts the person clicks it."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        id_token = request.session.get(SESSION_ID_TOKEN) if hasattr(request, "session") else None
        response = view(request, *args, **kwargs)
        if request.method != "POST" or not id_token or not enabled():
            return response
        if response.status_code not in (301, 302, 303):
            return response
        try:
            end_session = client().load_server_metadata().get("end_session_endpoint")
        except (requests.RequestException, ValueError) as exc:
            log.warning("OpenID Provider unreachable at sign-out: %s", exc)
            return response
        if not end_session:
            return response
        back = request.build_absolute_uri(reverse("web:login"))
        target = client().create_logout_url(
            post_logout_redirect_uri=back,
            id_token_hint=str(id_token),
            client_id=settings.OIDC_CLIENT_ID,
        )
        context = {"provider_logout_url": target["url"], "provider": settings.OIDC_PROVIDER_NAME}
        return render(request, "registration/oidc_logout.html", context)

    return wrapped


def password_login(view: View) -> View:
    """Wraps /login/ (the password form, console/web/auth.py), which LOCAL_LOGIN=0 turns off:
    the page shows only "Sign in with …" and a password sent anyway is refused unread."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if request.method == "POST" and not settings.LOCAL_LOGIN:
            message = "Sign-in with a console password is turned off: use single sign-on."
            context = {"message": message, "local_login": False}
            return render(request, "registration/oidc_error.html", context, status=403)
        return view(request, *args, **kwargs)

    return wrapped
