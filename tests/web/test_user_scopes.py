"""Users page: limiting a user's roles to clusters and namespaces (RoleScope)."""

from __future__ import annotations

import html
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.test import Client

from issuance.models import Cluster, Event, RoleScope

pytestmark = pytest.mark.django_db


@pytest.fixture
def clusters(db: None) -> list[Cluster]:
    made = []
    for name in ("prod", "staging"):
        c = Cluster(name=name)
        c.kubeconfig = "apiVersion: v1"
        c.save()
        made.append(c)
    return made


def _scopes(user: User) -> set[tuple[str, str]]:
    return set(RoleScope.objects.filter(user=user).values_list("cluster__name", "namespace"))


def test_admin_limits_a_user_and_the_page_shows_it(
    client_for: Callable[[str | None], Client],
    role_users: dict[str, User],
    clusters: list[Cluster],
) -> None:
    admin, viewer = client_for("admin"), role_users["viewer"]
    response = admin.post(f"/users/{viewer.pk}/scopes/", {"scopes": "prod/team-a,  staging"})
    assert response.status_code == 302
    assert _scopes(viewer) == {("prod", "team-a"), ("staging", "")}
    page = admin.get("/users/").content.decode()
    assert 'value="prod/team-a, staging"' in page
    event = Event.objects.get(reason="ScopesChanged", name="viewer")
    assert event.actor == "admin" and "prod/team-a" in event.message
    # Empty: unscoped again.
    admin.post(f"/users/{viewer.pk}/scopes/", {"scopes": ""})
    assert _scopes(viewer) == set()


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("nowhere/team-a", "no cluster named 'nowhere'"),
        ("prod/Team_A", "not a Kubernetes namespace name"),
        ("prod/team-a, ghost", "no cluster named 'ghost'"),
    ],
)
def test_bad_scopes_are_refused_naming_the_entry_and_nothing_changes(
    client_for: Callable[[str | None], Client],
    role_users: dict[str, User],
    clusters: list[Cluster],
    text: str,
    said: str,
) -> None:
    viewer = role_users["viewer"]
    RoleScope.objects.create(user=viewer, cluster=clusters[1], namespace="")
    response = client_for("admin").post(
        f"/users/{viewer.pk}/scopes/", {"scopes": text}, follow=True
    )
    assert said in html.unescape(response.content.decode())
    assert _scopes(viewer) == {("staging", "")}


def test_admins_cannot_be_scoped_nor_scoped_users_made_admin(
    client_for: Callable[[str | None], Client],
    role_users: dict[str, User],
    clusters: list[Cluster],
) -> None:
    admin = client_for("admin")
    response = admin.post(
        f"/users/{role_users['admin'].pk}/scopes/", {"scopes": "prod"}, follow=True
    )
    assert "an admin cannot be limited" in response.content.decode()
    assert _scopes(role_users["admin"]) == set()
    viewer = role_users["viewer"]
    admin.post(f"/users/{viewer.pk}/scopes/", {"scopes": "prod"})
    response = admin.post(f"/users/{viewer.pk}/roles/", {"roles": ["admin"]}, follow=True)
    assert "an admin cannot be limited" in response.content.decode()
    assert not viewer.groups.filter(name="admin").exists()


def test_a_scoped_user_loses_the_console_wide_pages(
    client_for: Callable[[str | None], Client],
    role_users: dict[str, User],
    clusters: list[Cluster],
) -> None:
    operator = client_for("operator")
    assert operator.get("/issuers/").status_code == 200
    RoleScope.objects.create(user=role_users["operator"], cluster=clusters[0], namespace="team-a")
    assert operator.get("/issuers/").status_code == 403
    assert operator.get("/api/v1/certificates/").status_code == 403
