"""Roles given are roles held even when a role's group was deleted (the Django admin, or a
test database's flush): the groups are made again where roles are given."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from issuance.access import oidc
from issuance.access.roles import ROLES, granted_roles, role_groups
from issuance.access.users import create_user

pytestmark = pytest.mark.django_db


def test_missing_role_groups_are_made_and_unknown_names_ignored() -> None:
    Group.objects.filter(name__in=ROLES).delete()
    groups = role_groups(["operator", "viewer", "operator", "not-a-role"])
    assert [g.name for g in groups] == ["operator", "viewer"]
    assert set(Group.objects.values_list("name", flat=True)) == {"operator", "viewer"}
    assert role_groups(["viewer"]) == [Group.objects.get(name="viewer")]


def test_a_user_created_after_the_groups_went_holds_its_roles() -> None:
    Group.objects.filter(name__in=ROLES).delete()
    user, _ = create_user("late", ["operator"], actor="admin")
    assert granted_roles(user) == {"viewer", "operator"}


def test_a_provider_sign_in_after_the_groups_went_holds_its_roles(settings: object) -> None:
    Group.objects.filter(name__in=ROLES).delete()
    settings.OIDC_GROUP_ROLES = "ops=operator"  # type: ignore[attr-defined]
    user, _ = oidc.sign_in(
        "https://idp.example.test",
        {"sub": "s-1", "preferred_username": "oli", "groups": ["ops"]},
        username_claim="preferred_username",
        groups_claim="groups",
    )
    assert set(user.groups.values_list("name", flat=True)) == {"operator"}
