"""Users page (admin) and each user's API tokens: one-time secrets, roles, disable, guards."""

from __future__ import annotations

import hashlib
import importlib
from collections.abc import Callable
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.access.apitokens import create_token
from issuance.models import ApiToken, Event

pytestmark = pytest.mark.django_db


def _api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


# -- users --------------------------------------------------------------------------------


def test_admin_creates_user_with_one_time_password(
    client_for: Callable[[str | None], Client],
) -> None:
    admin = client_for("admin")
    page = admin.get("/users/")
    assert page.status_code == 200 and b'id="new-user"' in page.content
    # Post/redirect/get: the users page shows the password once.
    response = admin.post("/users/new/", {"username": "carol", "roles": ["operator"]}, follow=True)
    assert response.redirect_chain == [("/users/", 302)]
    assert response.status_code == 200
    password = response.context["password"]
    assert len(password) >= 20 and password.encode() in response.content
    assert response["Cache-Control"].startswith("max-age=0")  # never_cache: not stored
    carol = User.objects.get(username="carol")
    assert list(carol.groups.values_list("name", flat=True)) == ["operator"]
    assert carol.password != password and password not in carol.password  # hashed
    # Shown once: the next view of the page does not have it.
    assert password.encode() not in admin.get("/users/").content
    fresh = Client()
    assert fresh.login(username="carol", password=password)
    assert fresh.get("/certificates/").status_code == 200
    assert fresh.get("/users/").status_code == 403  # an operator, not an admin
    assert Event.objects.filter(kind="User", name="carol", reason="UserCreated").count() == 1


def test_create_user_errors_come_back_on_the_form(
    client_for: Callable[[str | None], Client],
) -> None:
    admin = client_for("admin")
    response = admin.post("/users/new/", {"username": "viewer", "roles": ["viewer"]})
    assert response.status_code == 400
    assert "exists" in str(response.context["form"].errors["username"])
    response = admin.post("/users/new/", {"username": "bad name!", "roles": []})
    assert response.status_code == 400 and "password" not in response.context


def test_admin_changes_roles(
    client_for: Callable[[str | None], Client], role_users: dict[str, User]
) -> None:
    viewer = role_users["viewer"]
    response = client_for("admin").post(
        f"/users/{viewer.pk}/roles/", {"roles": ["approver", "viewer"]}
    )
    assert response.status_code == 302
    assert sorted(viewer.groups.values_list("name", flat=True)) == ["approver", "viewer"]
    response = client_for("operator").post(f"/users/{viewer.pk}/roles/", {"roles": ["admin"]})
    assert response.status_code == 403
    assert not viewer.groups.filter(name="admin").exists()


def test_disable_stops_sessions_logins_and_tokens(
    client_for: Callable[[str | None], Client], role_users: dict[str, User]
) -> None:
    operator = role_users["operator"]
    session = client_for("operator")
    _, token = create_token(operator, "ci", actor="test")
    assert session.get("/certificates/").status_code == 200
    assert _api(token).get("/api/v1/certificates/").status_code == 200

    admin = client_for("admin")
    assert admin.post(f"/users/{operator.pk}/disable/").status_code == 302
    operator.refresh_from_db()
    assert not operator.is_active
    assert "/login/" in session.get("/certificates/")["Location"]  # the session stopped
    assert not Client().login(username="operator", password="pw-operator")
    response = _api(token).get("/api/v1/certificates/")
    assert response.status_code == 401
    assert b"disabled" in admin.get("/users/").content

    assert admin.post(f"/users/{operator.pk}/enable/").status_code == 302
    assert Client().login(username="operator", password="pw-operator")
    assert _api(token).get("/api/v1/certificates/").status_code == 200


def test_the_last_admin_cannot_disable_or_demote_themselves(
    client_for: Callable[[str | None], Client],
    role_users: dict[str, User],
    make_user: Callable[..., User],
) -> None:
    me = role_users["admin"]
    admin = client_for("admin")
    response = admin.post(f"/users/{me.pk}/disable/", follow=True)
    assert b"would leave no active admin" in response.content
    admin.post(f"/users/{me.pk}/roles/", {"roles": ["viewer"]})
    me.refresh_from_db()
    assert me.is_active and me.groups.filter(name="admin").exists()

    # With another active admin, the same change is allowed.
    make_user("second-admin", "admin")
    admin.post(f"/users/{me.pk}/roles/", {"roles": ["viewer"]})
    assert not me.groups.filter(name="admin").exists()


def test_a_disabled_admin_does_not_count(
    client_for: Callable[[str | None], Client],
    role_users: dict[str, User],
    make_user: Callable[..., User],
) -> None:
    me = role_users["admin"]
    other = make_user("other-admin", "admin")
    other.is_active = False
    other.save()
    response = client_for("admin").post(f"/users/{me.pk}/disable/", follow=True)
    assert b"would leave no active admin" in response.content


def test_users_page_queries_do_not_grow(
    client_for: Callable[[str | None], Client], make_user: Callable[..., User]
) -> None:
    admin = client_for("admin")

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert admin.get("/users/").status_code == 200
        return len(ctx.captured_queries)

    for i in range(3):
        make_user(f"u{i}", "viewer")
    few = queries()
    for i in range(3, 30):
        make_user(f"u{i}", "viewer", "operator")
    assert queries() == few


# -- API tokens ---------------------------------------------------------------------------


def test_token_created_shown_once_and_stored_hashed(
    client_for: Callable[[str | None], Client], role_users: dict[str, User]
) -> None:
    viewer = client_for("viewer")
    assert viewer.get("/account/tokens/").status_code == 200
    response = viewer.post("/account/tokens/new/", {"name": "laptop"}, follow=True)
    assert response.redirect_chain == [("/account/tokens/", 302)]
    assert response.status_code == 200
    text = response.context["token_text"]
    assert len(text) >= 43 and text.encode() in response.content
    row = ApiToken.objects.get(user=role_users["viewer"])
    assert row.name == "laptop" and row.digest == hashlib.sha256(text.encode()).hexdigest()
    assert text.startswith(row.prefix) and len(row.prefix) == 8
    # No column holds the token.
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM issuance_apitoken")
        stored = [str(v) for r in cursor.fetchall() for v in r]
    assert not any(text in v for v in stored)
    listing = viewer.get("/account/tokens/").content
    assert text.encode() not in listing and row.prefix.encode() in listing
    assert b"laptop" in listing and b"never" in listing  # not used yet

    api = _api(text)
    assert api.get("/api/v1/certificates/").status_code == 200
    assert api.post("/api/v1/issuers/", {}, format="json").status_code == 403  # a viewer's


def test_last_used_is_written_at_most_once_a_minute(role_users: dict[str, User]) -> None:
    row, text = create_token(role_users["viewer"], "poller", actor="test")
    api = _api(text)
    assert api.get("/api/v1/scheduler/").status_code == 200
    row.refresh_from_db()
    first = row.last_used_at
    assert first is not None
    with CaptureQueriesContext(connection) as ctx:
        assert api.get("/api/v1/scheduler/").status_code == 200
    assert not [q for q in ctx.captured_queries if q["sql"].startswith("UPDATE")]
    row.refresh_from_db()
    assert row.last_used_at == first
    earlier = timezone.now() - timedelta(minutes=2)
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=earlier)
    assert api.get("/api/v1/scheduler/").status_code == 200
    row.refresh_from_db()
    assert row.last_used_at is not None and row.last_used_at > earlier


def test_revoke_stops_the_token(
    client_for: Callable[[str | None], Client], role_users: dict[str, User]
) -> None:
    row, text = create_token(role_users["operator"], "ci", actor="test")
    _, kept_text = create_token(role_users["operator"], "other", actor="test")
    response = client_for("operator").post(f"/account/tokens/{row.pk}/revoke/")
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    assert _api(text).get("/api/v1/certificates/").status_code == 401
    assert _api(kept_text).get("/api/v1/certificates/").status_code == 200  # only that one
    assert b"revoked" in client_for("operator").get("/account/tokens/").content


def test_another_users_token_is_neither_listed_nor_revocable(
    client_for: Callable[[str | None], Client], role_users: dict[str, User]
) -> None:
    row, text = create_token(role_users["viewer"], "viewer-secret-name", actor="test")
    operator = client_for("operator")
    assert b"viewer-secret-name" not in operator.get("/account/tokens/").content
    assert operator.post(f"/account/tokens/{row.pk}/revoke/").status_code == 404
    # Not even an admin revokes another user's token from their own page.
    assert client_for("admin").post(f"/account/tokens/{row.pk}/revoke/").status_code == 404
    row.refresh_from_db()
    assert row.revoked_at is None
    assert _api(text).get("/api/v1/certificates/").status_code == 200


def test_token_pages_need_login_and_csrf(role_users: dict[str, User]) -> None:
    anonymous = Client()
    assert "/login/" in anonymous.get("/account/tokens/")["Location"]
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(role_users["viewer"])
    assert strict.post("/account/tokens/new/", {"name": "x"}).status_code == 403
    assert not ApiToken.objects.exists()


def test_token_endpoint_makes_a_new_token_each_time(role_users: dict[str, User]) -> None:
    body = {"username": "viewer", "password": "pw-viewer"}
    first = APIClient().post("/api/v1/token/", body, format="json").json()["token"]
    second = APIClient().post("/api/v1/token/", body, format="json").json()["token"]
    assert first != second
    assert ApiToken.objects.filter(user=role_users["viewer"]).count() == 2
    assert _api(first).get("/api/v1/certificates/").status_code == 200


def test_migration_moves_drf_tokens(role_users: dict[str, User]) -> None:
    """An existing DRF key keeps working after the migration copies it as a digest."""
    from django.apps import apps

    migration = importlib.import_module("issuance.migrations.0013_console_users_charts")
    key = "0123456789abcdef0123456789abcdef01234567"
    # As DRF's migration made the column.
    created_type = "timestamp with time zone" if connection.vendor == "postgresql" else "datetime"
    with connection.cursor() as cursor:
        cursor.execute(
            'CREATE TABLE "authtoken_token" ("key" varchar(40) PRIMARY KEY, '
            f'"created" {created_type} NULL, "user_id" integer NOT NULL)'
        )
        cursor.execute(
            'INSERT INTO "authtoken_token" ("key", "created", "user_id") VALUES (%s, %s, %s)',
            [key, timezone.now(), role_users["viewer"].pk],
        )
    migration.copy_drf_tokens(apps, SimpleNamespace(connection=connection))
    row = ApiToken.objects.get(user=role_users["viewer"])
    assert row.name == "migrated" and row.digest == hashlib.sha256(key.encode()).hexdigest()
    assert abs((row.created_at - timezone.now()).total_seconds()) < 60
    assert _api(key).get("/api/v1/certificates/").status_code == 200
