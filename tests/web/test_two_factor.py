"""Second factor and passwords of local accounts (issue 23 item 3, issue 25 item 4): the
sign-in steps, enrolment with recovery codes shown once, codes counting toward the lock,
the token endpoint, admin resets, the forced password change and the Django admin switch.

Real test client with an address (so django-axes counts), codes made by pyotp from the
device's secret as an authenticator app would.
"""

from __future__ import annotations

import re
import time
from base64 import b32encode
from collections.abc import Callable

import pyotp
import pytest
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import Settings
from rest_framework.test import APIClient

from issuance import environment as env
from issuance.access import passwords, signin, two_factor
from issuance.models import Event, PasswordChangeRequired, RecoveryCode, TOTPFactor

pytestmark = pytest.mark.django_db

ADDRESS = "192.0.2.10"
OTHER = "198.51.100.30"


def sign_in(username: str, password: str | None = None, address: str = ADDRESS) -> Client:
    client = Client(REMOTE_ADDR=address)
    response = client.post(
        "/login/", {"username": username, "password": password or f"pw-{username}"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    return client


def totp_for(device: TOTPFactor) -> pyotp.TOTP:
    return pyotp.TOTP(b32encode(device.bin_key).decode())


def code_at(device: TOTPFactor, steps_ahead: int = 0) -> str:
    """The app's code now, or one step later (django-otp refuses a code used before, and
    accepts one step of drift: a second sign-in in the same 30 s uses the next code)."""
    return str(totp_for(device).at(time.time() + 30 * steps_ahead))


def enrolled(user: User) -> tuple[TOTPFactor, list[str]]:
    device = TOTPFactor.objects.create(user=user, name="app", confirmed=True)
    return device, two_factor.new_recovery_codes(user)


def reasons(name: str) -> list[str]:
    return list(Event.objects.filter(name=name).values_list("reason", flat=True))


def test_defaults() -> None:
    assert settings.REQUIRE_2FA == "admins"
    assert settings.ENABLE_DJANGO_ADMIN is False
    assert Client().get("/admin/").status_code == 404
    assert Client().get("/admin/login/").status_code == 404


def test_require_2fa_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REQUIRE_2FA", "everyone")
    with pytest.raises(env.BadValue, match="REQUIRE_2FA='everyone'"):
        env.REQUIRE_2FA.value()
    monkeypatch.setenv("REQUIRE_2FA", "ALL")
    assert env.REQUIRE_2FA.value() == "all"


def test_an_admin_without_a_factor_enrols_at_sign_in(make_user: Callable[..., User]) -> None:
    admin = make_user("root", "admin")
    client = sign_in("root")
    # Every page leads to the set-up, keeping where the user was going.
    response = client.get("/certificates/")
    assert response.status_code == 302
    assert response["Location"] == "/account/two-factor/setup/?next=%2Fcertificates%2F"
    # Session-authenticated API calls see no one yet.
    assert client.get("/api/v1/certificates/").status_code in (401, 403)
    page = client.get(response["Location"])
    assert page.status_code == 200
    text = page.content.decode()
    assert 'src="/account/two-factor/qr.svg"' in text
    device = TOTPFactor.objects.get(user=admin, confirmed=False)
    key = b32encode(device.bin_key).decode().rstrip("=")
    shown = re.search(r'<code class="secret" id="manual-key">([A-Z2-7 ]+)</code>', text)
    assert shown is not None and shown.group(1).replace(" ", "") == key
    svg = client.get("/account/two-factor/qr.svg")
    assert svg["Content-Type"] == "image/svg+xml"
    assert svg.content.startswith(b"<svg")
    assert "no-cache" in svg["Cache-Control"] or "no-store" in svg["Cache-Control"]
    # A reload shows the same secret (the app may have scanned it already).
    assert key.encode() in b"".join(client.get("/account/two-factor/setup/").content.split(b" "))

    wrong = client.post("/account/two-factor/setup/", {"code": "000000", "next": "/certificates/"})
    assert wrong.status_code == 400
    assert "does not match" in wrong.content.decode()
    done = client.post(
        "/account/two-factor/setup/", {"code": code_at(device), "next": "/certificates/"}
    )
    assert done.status_code == 302
    assert done["Location"] == "/account/two-factor/recovery-codes/?next=%2Fcertificates%2F"
    codes_page = client.get(done["Location"]).content.decode()
    codes = re.findall(r'<code class="secret">([a-z2-7]{5}-[a-z2-7]{5})</code>', codes_page)
    assert len(codes) == two_factor.RECOVERY_CODE_COUNT
    assert 'href="/certificates/"' in codes_page
    # Shown once: a reload goes to the account page, the codes are not in it.
    again = client.get(done["Location"])
    assert again.status_code == 302
    assert again["Location"] == "/account/security/"
    assert codes[0] not in client.get("/account/security/").content.decode()
    assert client.get("/certificates/").status_code == 200
    assert client.get("/api/v1/certificates/").status_code == 200
    assert TOTPFactor.objects.get(user=admin).confirmed
    assert two_factor.ENROLLED in reasons("root")


def test_a_viewer_needs_no_factor_by_default(make_user: Callable[..., User]) -> None:
    make_user("vera", "viewer")
    client = sign_in("vera")
    assert client.get("/").status_code == 200


@pytest.mark.parametrize(
    ("policy", "role", "asked"),
    [("all", "viewer", True), ("none", "admin", False), ("admins", "admin", True)],
)
def test_the_policy_decides_who_enrols(
    settings: Settings, make_user: Callable[..., User], policy: str, role: str, asked: bool
) -> None:
    settings.REQUIRE_2FA = policy
    make_user("pat", role)
    response = sign_in("pat").get("/")
    if asked:
        assert response.status_code == 302
        assert response["Location"].startswith("/account/two-factor/setup/")
    else:
        assert response.status_code == 200


def test_sign_in_with_a_code_and_with_a_recovery_code(make_user: Callable[..., User]) -> None:
    user = make_user("otto", "viewer")
    device, codes = enrolled(user)
    client = sign_in("otto")
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/login/verify/?next=%2F"
    assert "Second factor" in client.get(response["Location"]).content.decode()
    assert client.post("/login/verify/", {"code": code_at(device), "next": "/"})["Location"] == "/"
    assert client.get("/").status_code == 200

    other = sign_in("otto")
    used = other.post("/login/verify/", {"code": codes[0].upper(), "next": "/"})
    assert used.status_code == 302
    assert other.get("/").status_code == 200
    assert RecoveryCode.objects.filter(device__user=user).count() == len(codes) - 1
    assert two_factor.RECOVERY_CODE_USED in reasons("otto")

    third = sign_in("otto")
    refused = third.post("/login/verify/", {"code": codes[0], "next": "/"})
    assert refused.status_code == 400
    assert "not right" in refused.content.decode()
    assert third.get("/").status_code == 302
    assert signin.FAILED in reasons("otto")


def test_wrong_codes_count_toward_the_lock(make_user: Callable[..., User]) -> None:
    user = make_user("gus", "viewer")
    enrolled(user)
    client = sign_in("gus")
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post("/login/verify/", {"code": "123456"}).status_code == 400
    locked = client.post("/login/verify/", {"code": "123456"})
    assert locked.status_code == 429
    assert "locked" in locked.content.decode()
    assert (
        sum(
            AccessAttempt.objects.filter(username="gus").values_list(
                "failures_since_start", flat=True
            )
        )
        == settings.AXES_FAILURE_LIMIT
    )
    # The half-done sign-in ended, and the account is locked on every form.
    assert client.get("/").status_code == 302
    assert client.get("/")["Location"].startswith("/login/")
    again = Client(REMOTE_ADDR=OTHER).post("/login/", {"username": "gus", "password": "pw-gus"})
    assert again.status_code == 429
    assert signin.LOCKED in reasons("gus")


def test_the_token_endpoint_refuses_a_password_alone(make_user: Callable[..., User]) -> None:
    with_factor = make_user("fay", "viewer")
    enrolled(with_factor)
    make_user("root", "admin")  # REQUIRE_2FA=admins: must have one, has none yet
    flagged = make_user("new", "viewer")
    passwords.require_change(flagged, actor="root")
    make_user("plain", "viewer")
    for name, words in (
        ("fay", "second factor"),
        ("root", "second factor"),
        ("new", "set by an admin"),
    ):
        response = APIClient().post(
            "/api/v1/token/", {"username": name, "password": f"pw-{name}"}, format="json"
        )
        assert response.status_code == 403, name
        assert words in response.json()["detail"]
        assert "console" in response.json()["detail"]
    ok = APIClient().post(
        "/api/v1/token/", {"username": "plain", "password": "pw-plain"}, format="json"
    )
    assert ok.status_code == 200


def test_api_tokens_are_unaffected(make_user: Callable[..., User]) -> None:
    from issuance.access.apitokens import create_token

    user = make_user("bot", "viewer")
    enrolled(user)
    _, text = create_token(user, "ci", actor="bot")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {text}")
    assert api.get("/api/v1/certificates/").status_code == 200


def test_an_admin_resets_a_factor(make_user: Callable[..., User]) -> None:
    make_user("boss", "admin", superuser=True)
    lost = make_user("lost", "viewer")
    enrolled(lost)
    boss = Client(enforce_csrf_checks=True)
    boss.force_login(User.objects.get(username="boss"))
    page = boss.get("/users/").content.decode()
    assert f"/users/{lost.pk}/two-factor/reset/" in page
    # CSRF: a POST without the token is refused.
    assert boss.post(f"/users/{lost.pk}/two-factor/reset/").status_code == 403
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert token is not None
    done = boss.post(f"/users/{lost.pk}/two-factor/reset/", {"csrfmiddlewaretoken": token.group(1)})
    assert done.status_code == 302
    assert not two_factor.has_factor(lost)
    assert not RecoveryCode.objects.filter(device__user=lost).exists()
    event = Event.objects.get(name="lost", reason=two_factor.RESET)
    assert event.actor == "boss"
    # Only admins.
    make_user("op", "operator")
    enrolled(lost)
    operator = Client()
    operator.force_login(User.objects.get(username="op"))
    assert operator.post(f"/users/{lost.pk}/two-factor/reset/").status_code == 403
    assert two_factor.has_factor(lost)


def test_the_api_resets_a_factor_and_a_password(make_user: Callable[..., User]) -> None:
    admin = make_user("boss", "admin")
    user = make_user("lost", "viewer")
    enrolled(user)
    api = APIClient()
    api.force_authenticate(admin)
    assert api.post("/api/v1/users/lost/reset-second-factor/").status_code == 200
    assert not two_factor.has_factor(user)
    answer = api.post("/api/v1/users/lost/reset-password/")
    assert answer.status_code == 200
    password = answer.json()["password"]
    assert User.objects.get(pk=user.pk).check_password(password)
    assert passwords.must_change(user)
    assert api.post("/api/v1/users/boss/reset-password/").status_code == 409
    viewer = APIClient()
    viewer.force_authenticate(user)
    assert viewer.post("/api/v1/users/boss/reset-second-factor/").status_code == 403


def test_a_user_an_admin_created_changes_the_password_first(
    make_user: Callable[..., User],
) -> None:
    make_user("boss", "admin", superuser=True)
    boss = Client()
    boss.force_login(User.objects.get(username="boss"))
    created = boss.post("/users/new/", {"username": "newbie", "roles": ["viewer"]}, follow=True)
    password = re.search(r'id="one-time-password">([^<]+)<', created.content.decode())
    assert password is not None
    newbie = User.objects.get(username="newbie")
    assert PasswordChangeRequired.objects.filter(user=newbie, set_by="boss").exists()

    client = sign_in("newbie", password.group(1))
    response = client.get("/certificates/")
    assert response["Location"] == "/account/password/?next=%2Fcertificates%2F"
    page = client.get(response["Location"]).content.decode()
    assert "choose your own" in page
    wrong = client.post(
        "/account/password/",
        {"old_password": "nope", "new_password1": "x", "new_password2": "x"},
    )
    assert wrong.status_code == 400
    assert AccessAttempt.objects.filter(username="newbie").exists()
    weak = client.post(
        "/account/password/",
        {
            "old_password": password.group(1),
            "new_password1": "password",
            "new_password2": "password",
        },
    )
    assert weak.status_code == 400
    assert "too common" in weak.content.decode()
    done = client.post(
        "/account/password/",
        {
            "old_password": password.group(1),
            "new_password1": "a-long-and-new-secret-42",
            "new_password2": "a-long-and-new-secret-42",
            "next": "/certificates/",
        },
    )
    assert done.status_code == 302
    assert done["Location"] == "/certificates/"
    assert client.get("/certificates/").status_code == 200
    assert not passwords.must_change(newbie)
    assert passwords.CHANGED in reasons("newbie")


def test_every_user_can_change_their_password(make_user: Callable[..., User]) -> None:
    make_user("vera", "viewer")
    client = sign_in("vera")
    dashboard = client.get("/").content.decode()
    assert 'href="/account/security/"' in dashboard
    assert 'href="/account/password/"' in client.get("/account/security/").content.decode()
    done = client.post(
        "/account/password/",
        {
            "old_password": "pw-vera",
            "new_password1": "another-long-secret-17",
            "new_password2": "another-long-secret-17",
        },
    )
    assert done["Location"] == "/account/security/"
    assert Client().login(username="vera", password="another-long-secret-17")


def test_an_admin_resets_a_password(make_user: Callable[..., User]) -> None:
    make_user("boss", "admin", superuser=True)
    user = make_user("forgot", "viewer")
    boss = Client()
    boss.force_login(User.objects.get(username="boss"))
    reset = boss.post(f"/users/{user.pk}/password/reset/")
    assert reset["Location"] == "/users/"  # post/redirect/get: the list shows it, once
    page = boss.get("/users/").content.decode()
    shown = re.search(r'id="one-time-password">([^<]+)<', page)
    assert shown is not None
    assert "one-time-password" not in boss.get("/users/").content.decode()
    assert User.objects.get(pk=user.pk).check_password(shown.group(1))
    assert passwords.must_change(user)
    assert Event.objects.get(name="forgot", reason=passwords.RESET).actor == "boss"
    assert sign_in("forgot", shown.group(1)).get("/")["Location"].startswith("/account/password/")


def test_the_django_admin_needs_the_second_factor(
    settings: Settings, make_user: Callable[..., User], django_admin_on: None
) -> None:
    root = make_user("root", "admin", superuser=True)
    device, _ = enrolled(root)
    assert Client().get("/admin/", follow=True).redirect_chain[-1][0] == ("/login/?next=/admin/")
    # A session that never gave the code (signed in before the factor existed) is asked
    # for it on the way in.
    unverified = Client()
    unverified.force_login(root)
    to_code = unverified.get("/admin/", follow=True).redirect_chain[-1][0]
    assert to_code == "/login/verify/?next=%2Fadmin%2F"
    assert (
        unverified.post("/login/verify/", {"code": code_at(device), "next": "/admin/"})["Location"]
        == "/admin/"
    )
    assert unverified.get("/admin/").status_code == 200
    client = sign_in("root")
    assert client.get("/admin/")["Location"].startswith("/login/verify/")
    client.post("/login/verify/", {"code": code_at(device, 1)})
    assert client.get("/admin/").status_code == 200
    # An admin without a factor sets one up on the way, even with REQUIRE_2FA=none.
    settings.REQUIRE_2FA = "none"
    make_user("ada", "admin")
    plain = sign_in("ada")
    assert plain.get("/").status_code == 200
    to_setup = plain.get("/admin/", follow=True).redirect_chain[-1][0]
    assert to_setup == "/account/two-factor/setup/?next=%2Fadmin%2F"
    # Not an admin: no entry, even verified.
    viewer = make_user("vic", "viewer")
    device, _ = enrolled(viewer)
    other = sign_in("vic")
    other.post("/login/verify/", {"code": code_at(device)})
    assert other.get("/admin/", follow=True).status_code == 403
