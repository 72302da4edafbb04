"""A console sign-in ends after SESSION_IDLE_TIMEOUT without a request from its user, and
SESSION_COOKIE_AGE after the sign-in however active (console.sessions). The defaults are
kept: the session's stored timestamps are moved into the past instead."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from console.sessions import LAST_SEEN, LAST_SEEN_RESOLUTION, SIGNED_IN_AT
from issuance.access.apitokens import create_token

pytestmark = pytest.mark.django_db


def signed_in(user: User) -> Client:
    client = Client()
    client.force_login(user)
    assert client.get("/").status_code == 200
    return client


def move_back(client: Client, **seconds: float) -> None:
    session = client.session
    for key, ago in seconds.items():
        session[key] = time.time() - ago
    session.save()


def is_signed_out(client: Client) -> bool:
    response = client.get("/certificates/")
    return response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_defaults(role_users: dict[str, User]) -> None:
    assert settings.SESSION_IDLE_TIMEOUT == 30 * 60
    assert settings.SESSION_COOKIE_AGE == 12 * 3600


def test_sign_in_stamps_the_session(role_users: dict[str, User]) -> None:
    client = signed_in(role_users["viewer"])
    session = client.session
    assert abs(session[SIGNED_IN_AT] - time.time()) < 60
    assert abs(session[LAST_SEEN] - time.time()) < 60


def test_an_idle_session_is_signed_out(role_users: dict[str, User]) -> None:
    client = signed_in(role_users["viewer"])
    move_back(client, **{LAST_SEEN: settings.SESSION_IDLE_TIMEOUT + 5})
    assert is_signed_out(client)
    # Flushed: the old session is gone, not just hidden, and signing in again works.
    assert "_auth_user_id" not in client.session
    assert not is_signed_out(signed_in(role_users["viewer"]))


def test_a_session_just_inside_the_idle_limit_stays_and_is_renewed(
    role_users: dict[str, User],
) -> None:
    client = signed_in(role_users["viewer"])
    move_back(client, **{LAST_SEEN: settings.SESSION_IDLE_TIMEOUT - 60})
    assert not is_signed_out(client)
    # That request counted: last-seen is now, so the session has the whole limit again.
    assert time.time() - client.session[LAST_SEEN] < 60


def test_live_refreshes_do_not_count_as_activity(role_users: dict[str, User]) -> None:
    client = signed_in(role_users["viewer"])
    move_back(client, **{LAST_SEEN: settings.SESSION_IDLE_TIMEOUT - 60})
    before = client.session[LAST_SEEN]
    # What console/static/js/live.js sends when a WebSocket nudge refreshes a part of the page.
    response = client.get("/", headers={"X-Live-Refresh": "1"})
    assert response.status_code == 200
    assert client.session[LAST_SEEN] == before
    move_back(client, **{LAST_SEEN: settings.SESSION_IDLE_TIMEOUT + 5})
    response = client.get("/", headers={"X-Live-Refresh": "1"})
    assert response.status_code == 302


def test_last_seen_is_written_at_most_once_a_minute(role_users: dict[str, User]) -> None:
    client = signed_in(role_users["viewer"])
    move_back(client, **{LAST_SEEN: LAST_SEEN_RESOLUTION / 2})
    before = client.session[LAST_SEEN]
    assert client.get("/").status_code == 200
    assert client.session[LAST_SEEN] == before


def test_an_active_session_ends_at_its_lifetime(role_users: dict[str, User]) -> None:
    client = signed_in(role_users["viewer"])
    move_back(client, **{SIGNED_IN_AT: settings.SESSION_COOKIE_AGE + 5, LAST_SEEN: 1})
    assert is_signed_out(client)


def test_a_new_sign_in_starts_both_limits_afresh(role_users: dict[str, User]) -> None:
    client = signed_in(role_users["viewer"])
    move_back(client, **{SIGNED_IN_AT: settings.SESSION_COOKIE_AGE - 10})
    # Signed in again on the same session (Django keeps its data across the new key).
    client.force_login(role_users["viewer"])
    assert time.time() - client.session[SIGNED_IN_AT] < 60


def test_signing_in_through_the_form_stamps_the_session(role_users: dict[str, User]) -> None:
    client = Client()
    response = client.post("/login/", {"username": "viewer", "password": "pw-viewer"})
    assert response.status_code == 302
    assert time.time() - client.session[SIGNED_IN_AT] < 60
    assert client.get("/").status_code == 200


def test_api_tokens_are_not_sessions(role_users: dict[str, User]) -> None:
    _, secret = create_token(role_users["viewer"], "script", actor="viewer")
    response = Client().get("/api/v1/certificates/", headers={"Authorization": f"Token {secret}"})
    assert response.status_code == 200
    assert "sessionid" not in response.cookies
