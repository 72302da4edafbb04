"""How long a console sign-in lasts: SESSION_COOKIE_AGE from the sign-in at most, and
SESSION_IDLE_TIMEOUT without a request from the user.

Both limits are kept here, from two timestamps in the session, rather than with Django's
expiry alone: Django moves a session's expiry on every save, so the absolute limit would
become a second idle limit, and SESSION_SAVE_EVERY_REQUEST with a short age would write the
session row on every request (the live refreshes included) and keep an open dashboard signed
in forever. Here the last-seen time is written at most once a minute, and requests the page
makes by itself (live.js marks them with `X-Live-Refresh`) do not count as the user's.

API tokens have no session and are not affected; an expired session is signed out (the
session flushed) before the view runs, so pages redirect to the sign-in page and session-auth
API calls answer 401/403 as for anyone signed out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import SESSION_KEY, logout
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponseBase

SIGNED_IN_AT = "_console_signed_in_at"
LAST_SEEN = "_console_last_seen"
# Writing last-seen on every request would save the session row on every request; a minute's
# slack on a limit counted in tens of minutes is not worth that.
LAST_SEEN_RESOLUTION = 60
BACKGROUND_HEADER = "X-Live-Refresh"


@receiver(user_logged_in, dispatch_uid="console.sessions.stamp_sign_in")
def stamp_sign_in(sender: Any, request: HttpRequest | None, **kwargs: Any) -> None:
    # A new sign-in on a session that was already signed in (the same user) starts afresh.
    if request is not None and hasattr(request, "session"):
        now = time.time()
        request.session[SIGNED_IN_AT] = now
        request.session[LAST_SEEN] = now


def expired(session: Any, now: float) -> str | None:
    """Why this signed-in session is over, or None."""
    signed_in_at = session.get(SIGNED_IN_AT)
    if isinstance(signed_in_at, (int, float)) and now - signed_in_at > settings.SESSION_COOKIE_AGE:
        return "lifetime"
    last_seen = session.get(LAST_SEEN)
    idle = settings.SESSION_IDLE_TIMEOUT
    if idle and isinstance(last_seen, (int, float)) and now - last_seen > idle:
        return "idle"
    return None


class SessionLimitsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        session = request.session
        # Anonymous requests carry no sign-in to limit (and a session without a cookie is
        # never loaded from the database here).
        if SESSION_KEY in session:
            now = time.time()
            if expired(session, now):
                logout(request)
            else:
                session.setdefault(SIGNED_IN_AT, now)  # signed in before this middleware
                last_seen = session.get(LAST_SEEN)
                user_request = BACKGROUND_HEADER not in request.headers
                if not isinstance(last_seen, (int, float)) or (
                    user_request and now - last_seen >= LAST_SEEN_RESOLUTION
                ):
                    session[LAST_SEEN] = now
        return self.get_response(request)
