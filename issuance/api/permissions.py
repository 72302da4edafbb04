"""Role checks for every API action, read from the one table (issuance.access.permissions).

A view names its `resource` (a row group of the table); its DRF action is mapped to the
table's action by `permissions.api_action` (list/retrieve → read, update → change, …), with
the view's own `permission_actions` for names that differ (`secret` → `read-key`). An
action the table does not have is refused for everyone; a method the view has no handler
for answers 405 to whoever may read the resource.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from issuance.access import permissions
from issuance.access.permissions import Rule
from issuance.access.roles import ADMIN, APPROVER, OPERATOR, VIEWER

__all__ = ["ADMIN", "APPROVER", "OPERATOR", "VIEWER", "RolePermission", "rule_of", "table_action"]


def table_action(view: Any, method: str) -> str | None:
    """The table's action for this request to `view` (None: no handler for the method)."""
    action = getattr(view, "action", None)
    if action is None:
        if hasattr(view, "get_extra_action_url_map"):
            return None  # a viewset without this method: no action at all
        # A plain APIView (the scheduler, the stats): what it does is read.
        return "read" if method in SAFE_METHODS and hasattr(view, method.lower()) else None
    overrides: dict[str, str] = getattr(view, "permission_actions", {})
    return overrides.get(str(action)) or permissions.api_action(str(action))


def rule_of(view: Any, method: str) -> Rule | None:
    """The table's rule for this request; None when the view or the table has none."""
    resource = getattr(view, "resource", None)
    action = table_action(view, method)
    if resource is None or action is None:
        return None
    return permissions.TABLE.get((str(resource), action))


class RolePermission(BasePermission):
    """Default permission class (settings.REST_FRAMEWORK)."""

    message = "You do not have the role this action needs."

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        method = str(request.method)
        rule = rule_of(view, method)
        if rule is None and not hasattr(view, method.lower()):
            # No handler for this method at all: whoever may read sees the honest 405.
            reading = permissions.TABLE.get((str(getattr(view, "resource", "")), "read"))
            return reading.held_by(user) if reading else permissions.may(user, "dashboard", "read")
        if rule is None:
            self.message = "This action is not allowed for anyone."
            return False
        if not rule.held_by(user):
            self.message = rule.refusal()
            return False
        return True
