"""The single sign-on pages through Django's test client, against the real provider where
they talk to it (tests/oidc/provider.mjs): LOCAL_LOGIN, the rules page's checks, and
refusals counting toward the shared sign-in lock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from issuance.access import signin
from issuance.models import Event, OidcGroupRule
from tests.oidc.provider import CLIENT_ID, CLIENT_SECRET, RunningProvider, running_provider


@pytest.fixture
def provider(tmp_path: Path, settings: Any) -> Iterator[RunningProvider]:
    with running_provider(tmp_path, ["http://testserver"]) as running:
        settings.OIDC_ISSUER_URL = running.issuer
        settings.OIDC_CLIENT_ID = CLIENT_ID
        settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
        settings.OIDC_ENABLED = True
        settings.OIDC_PROVIDER_NAME = "Test IdP"
        yield running


@pytest.mark.django_db
def test_local_login_off_shows_only_the_provider_and_refuses_passwords(
    provider: RunningProvider, settings: Any, role_users: dict[str, User]
) -> None:
    settings.LOCAL_LOGIN = False
    client = Client()
    page = client.get("/login/").content.decode()
    assert 'name="password"' not in page
    assert "Sign in with Test IdP" in page
    refused = client.post("/login/", {"username": "viewer", "password": "pw-viewer"})
    assert refused.status_code == 403
    assert "turned off" in refused.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_the_login_page_sends_to_the_provider_with_pkce_state_and_nonce(
    provider: RunningProvider,
) -> None:
    client = Client()
    assert "Sign in with Test IdP" in client.get("/login/").content.decode()
    answer = client.get("/login/sso/", {"next": "/certificates/"})
    assert answer.status_code == 302
    location = answer["Location"]
    assert location.startswith(provider.issuer + "/auth?")
    for part in (
        "code_challenge_method=S256",
        "code_challenge=",
        "state=",
        "nonce=",
        "scope=openid",
    ):
        assert part in location
    # Somewhere else entirely is not a place to come back to.
    client.get("/login/sso/", {"next": "https://elsewhere.example/"})
    assert "oidc_next" not in client.session


@pytest.mark.django_db
def test_refusals_count_toward_the_shared_lock(provider: RunningProvider, settings: Any) -> None:
    settings.AXES_FAILURE_LIMIT = 3
    client = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(3):
        forged = client.get("/login/sso/callback/", {"code": "forged", "state": "forged"})
        assert forged.status_code in (403, 429)
        assert b"Sign-in refused" in forged.content or b"locked" in forged.content
    assert Event.objects.filter(reason="SsoRefusedToken").count() == 3
    assert Event.objects.filter(reason="SignInLocked").count() == 1
    assert [(lock.what, lock.value) for lock in signin.current_locks()] == [
        ("address", "203.0.113.9")
    ]
    # The address is locked for the provider's sign-in and for passwords alike.
    assert client.get("/login/sso/").status_code == 429
    assert client.post("/login/", {"username": "x", "password": "y"}).status_code == 429


@pytest.mark.django_db
def test_the_rules_page_is_for_admins_with_csrf(role_users: dict[str, User]) -> None:
    viewer = Client()
    viewer.force_login(role_users["viewer"])
    assert viewer.get("/users/sso/").status_code == 403
    assert viewer.post("/users/sso/", {"rules": "x=admin"}).status_code == 403

    admin = Client(enforce_csrf_checks=True)
    admin.force_login(role_users["admin"])
    page = admin.get("/users/sso/")
    assert page.status_code == 200
    assert admin.post("/users/sso/", {"rules": "x=admin"}).status_code == 403  # no CSRF token
    token = page.context["csrf_token"]
    bad = admin.post("/users/sso/", {"rules": "x=admin\ny=sudo", "csrfmiddlewaretoken": token})
    assert bad.status_code == 400
    assert (
        "Rules, rule 2 (&#x27;y=sudo&#x27;): unknown role &#x27;sudo&#x27;" in bad.content.decode()
    )
    good = admin.post("/users/sso/", {"rules": "x=admin", "csrfmiddlewaretoken": token})
    assert good.status_code == 302
    assert list(OidcGroupRule.objects.values_list("group", "roles")) == [("x", "admin")]
    assert Event.objects.get(reason="GroupMappingChanged").actor == "admin"
    OidcGroupRule.objects.all().delete()


@pytest.mark.django_db
def test_the_group_rules_api_is_for_admins(role_users: dict[str, User], settings: Any) -> None:
    from rest_framework.test import APIClient

    settings.OIDC_GROUP_ROLES = "platform=admin"
    viewer = APIClient()
    viewer.force_authenticate(role_users["viewer"])
    assert viewer.get("/api/v1/sso/group-rules/").status_code == 403
    assert viewer.put("/api/v1/sso/group-rules/", {"rules": []}, format="json").status_code == 403

    admin = APIClient()
    admin.force_authenticate(role_users["admin"])
    bad = admin.put(
        "/api/v1/sso/group-rules/",
        {"rules": [{"group": "ops", "roles": ["admin"], "scopes": ["prod"]}]},
        format="json",
    )
    assert bad.status_code == 409
    assert "the admin role cannot be limited" in bad.json()["detail"]
    unknown = admin.put(
        "/api/v1/sso/group-rules/",
        {"rules": [{"group": "ops", "roles": ["viewer"], "scopes": ["qa"]}]},
        format="json",
    )
    assert unknown.status_code == 400
    assert "there is no cluster named 'qa'" in unknown.json()["rules"][0]
    good = admin.put(
        "/api/v1/sso/group-rules/",
        {"rules": [{"group": "ops", "roles": ["operator"]}]},
        format="json",
    )
    assert good.status_code == 200
    assert good.json() == {
        "environment": [{"group": "platform", "roles": ["admin"], "scopes": []}],
        "rules": [{"group": "ops", "roles": ["operator"], "scopes": []}],
    }
    assert admin.get("/api/v1/sso/group-rules/").json() == good.json()
    assert Event.objects.get(reason="GroupMappingChanged").actor == "admin"
    OidcGroupRule.objects.all().delete()


@pytest.mark.django_db
def test_without_local_login_no_password_is_checked_anywhere(role_users: dict[str, User]) -> None:
    from issuance.access.oidc import NoPasswordBackend

    backend = NoPasswordBackend()
    viewer = role_users["viewer"]
    assert backend.authenticate(None, username="viewer", password="pw-viewer") is None
    assert backend.get_user(viewer.pk) == viewer  # a provider's session still finds its user
