"""Roles are Django groups (created by a migration). Higher roles include lower ones."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Exists

VIEWER = "viewer"
OPERATOR = "operator"
APPROVER = "approver"
ADMIN = "admin"
ROLES = (VIEWER, OPERATOR, APPROVER, ADMIN)

# What each role may do beyond reading. viewer: read; operator: create/edit certificates and
# issuers, force-renew; approver: approve/deny requests (and read); admin: everything,
# including reading private keys through the secret endpoint.
_IMPLIES: dict[str, frozenset[str]] = {
    VIEWER: frozenset({VIEWER}),
    OPERATOR: frozenset({VIEWER, OPERATOR}),
    APPROVER: frozenset({VIEWER, APPROVER}),
    ADMIN: frozenset(ROLES),
}


def role_groups(names: Iterable[str]) -> list[Any]:
    """The groups of these roles, made when missing: a data migration makes them, but a
    group deleted since (in the Django admin, or a test database's flush) must not turn a
    role given into no role. One query when they all exist."""
    from django.contrib.auth.models import Group  # roles are read before the models load

    wanted = sorted({name for name in names if name in ROLES})
    found = {group.name: group for group in Group.objects.filter(name__in=wanted)}
    return [found.get(name) or Group.objects.get_or_create(name=name)[0] for name in wanted]


def granted_roles(user: Any) -> frozenset[str]:
    """The roles a user was given, expanded, wherever they apply. Superusers are admins.

    Cached on the user object. One query: the groups, and whether the user is scoped to
    clusters/namespaces (issuance/access/scope.py).
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_issuance_granted", None)
    if cached is not None:
        return frozenset(cached)
    scoped = False
    if getattr(user, "is_superuser", False):
        result = frozenset(ROLES)
    else:
        from issuance.models import RoleScope  # roles are read before the models are needed

        rows = user.groups.annotate(
            scoped=Exists(RoleScope.objects.filter(user_id=user.pk))
        ).values_list("name", "scoped")
        names = {name for name, _ in rows}
        scoped = any(flag for _, flag in rows)
        result = frozenset().union(*(_IMPLIES[n] for n in names if n in _IMPLIES))
    user._issuance_granted = result
    user._issuance_scoped = scoped
    return result


def is_scoped(user: Any) -> bool:
    """Whether the user's roles are limited to clusters/namespaces (RoleScope rows)."""
    granted_roles(user)
    return bool(getattr(user, "_issuance_scoped", False))


def roles_of(user: Any) -> frozenset[str]:
    """The roles a user holds console-wide, expanded: the console's own resources and pages.

    A scoped user holds none console-wide; their roles apply to mirrored objects inside
    their scope only (issuance.access.scope.has_scoped_role).
    """
    granted = granted_roles(user)
    return frozenset() if is_scoped(user) else granted


def has_role(user: Any, role: str) -> bool:
    return role in roles_of(user)
