"""Role checks for every API action: reads need any role, changes a named one."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from issuance.roles import ADMIN, APPROVER, OPERATOR, VIEWER, has_role

__all__ = ["ADMIN", "APPROVER", "OPERATOR", "VIEWER", "RolePermission", "required_role"]


def required_role(request: Request, view: Any) -> str | None:
    """The role this request needs; None means no action is declared for it (denied).

    Views declare `required_roles = {"create": OPERATOR, "approve": APPROVER, ...}` keyed
    by viewset action; an undeclared read is a viewer read, an undeclared write is denied.
    """
    roles: dict[str, str] = getattr(view, "required_roles", {})
    action = getattr(view, "action", None)
    if action and action in roles:
        return roles[action]
    if request.method in SAFE_METHODS:
        return VIEWER
    return None


class RolePermission(BasePermission):
    """Default permission class (settings.REST_FRAMEWORK)."""

    message = "You do not have the role this action needs."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        role = required_role(request, view)
        if role is None and not hasattr(view, str(request.method).lower()):
            # No handler for this method at all: let readers see the honest 405.
            return has_role(user, VIEWER)
        if role is None:
            self.message = "This action is not allowed for anyone."
            return False
        if not has_role(user, role):
            self.message = f"This action needs the {role} role."
            return False
        return True
