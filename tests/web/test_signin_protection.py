"""Brute-force protection (issue 23, item 4): failed sign-ins lock the account and the
address on every way to sign in, admins see and lift locks, bad tokens are limited, and all of
it is in the audit log. Real client, real axes tables; the lock time is the product default."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.access import signin
from issuance.models import Event

pytestmark = pytest.mark.django_db

ATTACKER = "203.0.113.7"
OTHER = "198.51.100.20"


def login(username: str, password: str, address: str = ATTACKER) -> tuple[Client, int, str]:
    client = Client(REMOTE_ADDR=address)
    response = client.post("/login/", {"username": username, "password": password})
    return client, response.status_code, response.content.decode()


def token(username: str, password: str, address: str = ATTACKER) -> tuple[int, dict[str, str]]:
    response = APIClient(REMOTE_ADDR=address).post(
        "/api/v1/token/", {"username": username, "password": password}, format="json"
    )
    return response.status_code, response.json()


def reasons(name: str) -> list[str]:
    return list(Event.objects.filter(kind=signin.KIND, name=name).values_list("reason", flat=True))


def alert(page: str) -> str:
    found = re.search(r'<p class="error" role="alert">(.*?)</p>', page, re.S)
    assert found, page
    return found.group(1)


def age_failures(by: timedelta) -> None:
    """The cool-off passing: django-axes' stored failure times moved into the past."""
    AccessAttempt.objects.update(attempt_time=timezone.now() - by)


def test_defaults_are_ten_failures_and_fifteen_minutes() -> None:
    assert settings.AXES_FAILURE_LIMIT == 10
    assert timedelta(minutes=15) == settings.AXES_COOLOFF_TIME
    assert settings.AUTHENTICATION_BACKENDS[0] == "console.signin_protection.LockingBackend"


def test_twenty_wrong_passwords_lock_the_account_until_the_lock_time_passes(
    make_user: Callable[..., User],
) -> None:
    make_user("alice", "viewer")
    statuses = [login("alice", f"wrong-{i}")[1] for i in range(20)]
    limit = settings.AXES_FAILURE_LIMIT
    assert statuses[: limit - 1] == [200] * (limit - 1)  # the form again, with its error
    assert statuses[limit - 1 :] == [429] * (20 - limit + 1)

    # The right password is refused during the lock, and the page says locked, not "wrong".
    client, status, page = login("alice", "pw-alice")
    assert status == 429
    assert "locked" in page
    assert "didn&#x27;t match" not in page and "didn't match" not in page
    assert "_auth_user_id" not in client.session
    # A wrong password gets the very same answer (nothing tells the two apart).
    _, wrong_status, wrong_page = login("alice", "wrong-again")
    assert (wrong_status, alert(wrong_page)) == (status, alert(page))

    # Still locked a minute before the lock time ends; open after it.
    age_failures(settings.AXES_COOLOFF_TIME - timedelta(minutes=1))
    assert login("alice", "pw-alice")[1] == 429
    age_failures(settings.AXES_COOLOFF_TIME + timedelta(seconds=1))
    client, status, _ = login("alice", "pw-alice")
    assert status == 302
    assert client.session["_auth_user_id"] == str(User.objects.get(username="alice").pk)

    recorded = reasons("alice")
    assert recorded.count(signin.FAILED) == limit
    assert recorded.count(signin.LOCKED) == 1
    assert recorded.count(signin.REFUSED_LOCKED) >= 10
    assert recorded.count(signin.SIGNED_IN) == 1
    failure = Event.objects.filter(kind=signin.KIND, reason=signin.FAILED).first()
    assert failure is not None and ATTACKER in failure.message
    assert not Event.objects.filter(message__contains="wrong-").exists()  # no password


def test_another_account_from_another_address_is_unaffected(
    make_user: Callable[..., User],
) -> None:
    make_user("alice", "viewer")
    make_user("bob", "viewer")
    for i in range(settings.AXES_FAILURE_LIMIT):
        login("alice", f"wrong-{i}")
    assert login("alice", "pw-alice")[1] == 429
    assert login("bob", "pw-bob", address=OTHER)[1] == 302
    assert token("bob", "pw-bob", address=OTHER)[0] == 200


def test_the_address_is_locked_for_every_account_too(make_user: Callable[..., User]) -> None:
    make_user("bob", "viewer")
    # Password spraying: one guess on each of many accounts from one address.
    for i in range(settings.AXES_FAILURE_LIMIT):
        login(f"user-{i}", "Winter2026!")
    assert login("bob", "pw-bob")[1] == 429
    assert login("bob", "pw-bob", address=OTHER)[1] == 302
    # An admin lifts the address's lock.
    admin = make_user("root", "admin")
    client = Client()
    client.force_login(admin)
    client.post("/users/locks/lift/", {"what": "address", "value": ATTACKER})
    assert login("bob", "pw-bob")[1] == 302


def test_wrong_passwords_on_the_login_page_lock_the_token_endpoint(
    make_user: Callable[..., User],
) -> None:
    make_user("alice", "viewer")
    for i in range(settings.AXES_FAILURE_LIMIT):
        login("alice", f"wrong-{i}")
    status, body = token("alice", "pw-alice", address=OTHER)  # the account is locked
    assert status == 429
    assert "token" not in body and "locked" in body["detail"]


def test_wrong_passwords_on_the_token_endpoint_lock_the_login_page(
    make_user: Callable[..., User],
) -> None:
    make_user("alice", "viewer")
    statuses = [token("alice", f"wrong-{i}")[0] for i in range(settings.AXES_FAILURE_LIMIT)]
    assert statuses[:-1] == [400] * (settings.AXES_FAILURE_LIMIT - 1)
    assert statuses[-1] == 429
    assert login("alice", "pw-alice", address=OTHER)[1] == 429
    response = APIClient(REMOTE_ADDR=OTHER).post(
        "/api/v1/token/", {"username": "alice", "password": "pw-alice"}, format="json"
    )
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 14 * 60
    assert reasons("alice").count(signin.LOCKED) == 1


def test_the_admin_login_shares_the_lock(
    make_user: Callable[..., User], django_admin_on: None
) -> None:
    """With ENABLE_DJANGO_ADMIN, /admin/ signs in through the console's login page (and its
    second factor: tests/web/test_two_factor.py), so the lock is the same one."""
    make_user("root", "admin", superuser=True)
    for i in range(settings.AXES_FAILURE_LIMIT):
        login("root", f"wrong-{i}")
    client = Client(REMOTE_ADDR=OTHER)
    to_login = client.get("/admin/login/?next=/admin/")
    assert to_login.status_code == 302
    assert to_login["Location"] == "/login/?next=/admin/"
    response = client.post(
        "/login/", {"username": "root", "password": "pw-root", "next": "/admin/"}
    )
    assert response.status_code == 429


def test_bad_api_tokens_get_429_after_the_limit(make_user: Callable[..., User]) -> None:
    from issuance.access.apitokens import create_token

    user = make_user("ci", "viewer")
    _, good = create_token(user, "ci", actor="ci")
    limit = settings.TOKEN_FAILURE_LIMIT
    bad = APIClient(REMOTE_ADDR=ATTACKER)
    statuses = []
    for i in range(limit + 2):
        bad.credentials(HTTP_AUTHORIZATION=f"Token not-a-token-{i}")
        statuses.append(bad.get("/api/v1/certificates/").status_code)
    assert statuses[:limit] == [401] * limit
    assert statuses[limit:] == [429, 429]
    # Even the right token is refused from there now; from elsewhere it works.
    bad.credentials(HTTP_AUTHORIZATION=f"Token {good}")
    refused = bad.get("/api/v1/certificates/")
    assert refused.status_code == 429
    assert 0 < int(refused["Retry-After"]) <= settings.TOKEN_FAILURE_WINDOW.total_seconds()
    other = APIClient(REMOTE_ADDR=OTHER)
    other.credentials(HTTP_AUTHORIZATION=f"Token {good}")
    assert other.get("/api/v1/certificates/").status_code == 200
    assert Event.objects.filter(reason=signin.TOKEN_LIMIT, message__contains=ATTACKER).count() == 1


def test_bad_bootstrap_tokens_get_429_after_the_limit(db: None) -> None:
    client = APIClient(REMOTE_ADDR=ATTACKER)
    client.credentials(HTTP_AUTHORIZATION="Bearer abcdef.0123456789abcdef")
    limit = settings.TOKEN_FAILURE_LIMIT
    url = "/api/v1/bootstrap/certificaterequests/"
    statuses = [client.get(url).status_code for _ in range(limit + 1)]
    assert statuses == [401] * limit + [429]


def test_an_admin_lifts_a_lock_and_the_user_signs_in(
    make_user: Callable[..., User], client_for: Callable[[str | None], Client]
) -> None:
    make_user("alice", "viewer")
    for i in range(settings.AXES_FAILURE_LIMIT):
        login("alice", f"wrong-{i}")
    admin = client_for("admin")
    page = admin.get("/users/locks/").content.decode()
    assert 'data-lock="account:alice"' in page
    assert f'data-lock="address:{ATTACKER}"' in page

    response = admin.post("/users/locks/lift/", {"what": "account", "value": "alice"})
    assert response.status_code == 302
    assert 'data-lock="account:alice"' not in admin.get("/users/locks/").content.decode()
    # The address's failures were all on this account: forgotten with it.
    client, status, _ = login("alice", "pw-alice")
    assert status == 302
    lifts = Event.objects.filter(reason=signin.LOCK_LIFTED)
    assert list(lifts.values_list("actor", "name")) == [("admin", "alice")]
    assert client.post("/logout/").status_code == 302
    assert reasons("alice")[:2] == [signin.SIGNED_OUT, signin.SIGNED_IN]  # newest first


def test_anonymous_is_sent_to_login(client_for: Callable[[str | None], Client]) -> None:
    response = client_for(None).get("/users/locks/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_the_api_lists_and_lifts_locks(
    make_user: Callable[..., User], api_client_for: Callable[[User | None], APIClient]
) -> None:
    make_user("alice", "viewer")
    for i in range(settings.AXES_FAILURE_LIMIT):
        token("alice", f"wrong-{i}")
    admin = api_client_for(make_user("root", "admin"))
    ids = [lock["id"] for lock in admin.get("/api/v1/signin-locks/").json()]
    assert ids == ["account:alice", f"address:{ATTACKER}"]
    viewer = api_client_for(User.objects.get(username="alice"))
    assert viewer.get("/api/v1/signin-locks/").status_code == 403
    assert viewer.delete("/api/v1/signin-locks/account:alice/").status_code == 403
    assert admin.delete("/api/v1/signin-locks/account:alice/").status_code == 204
    assert admin.delete("/api/v1/signin-locks/account:alice/").status_code == 404
    assert token("alice", "pw-alice")[0] == 200
    assert Event.objects.filter(reason=signin.LOCK_LIFTED, actor="root").count() == 1
