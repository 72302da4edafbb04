"""Roles are Django groups (created by a migration). Higher roles include lower ones."""

from __future__ import annotations

from typing import Any

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


def roles_of(user: Any) -> frozenset[str]:
    """The roles a user holds, expanded. Superusers are admins. Cached on the user object."""
    if user is None or not getattr(user, "is_authenticated", False):
        return frozenset()
    cached = getattr(user, "_issuance_roles", None)
    if cached is not None:
        return frozenset(cached)
    if getattr(user, "is_superuser", False):
        result = frozenset(ROLES)
    else:
        names = set(user.groups.values_list("name", flat=True))
        result = frozenset().union(*(_IMPLIES[n] for n in names if n in _IMPLIES))
    user._issuance_roles = result
    return result


def has_role(user: Any, role: str) -> bool:
    return role in roles_of(user)
