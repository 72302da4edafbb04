"""Role checks for the cluster-mode API (clusters, mirrored objects, their actions).

The rules are in the one table (issuance.access.permissions): reads and the actions on
mirrored objects are `in-scope` rules (the role *granted*, scoped or not; the view then
narrows to the scope: an object outside it answers 404), administration of clusters is
console-wide (a scoped user never holds it). Views list in `object_actions` the actions
whose role depends on the object (renew, approve, deny): those are checked by the view once
the object is found (`check_in_scope`), so an object outside the scope answers 404 first,
whatever the role.
"""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request

from issuance.access import permissions
from issuance.access.roles import granted_roles
from issuance.api.permissions import RolePermission, rule_of


class ScopedRolePermission(RolePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        action = getattr(view, "action", None)
        if action and action in getattr(view, "object_actions", ()):
            # Checked by the view against the object's cluster/namespace, after the lookup.
            if not granted_roles(user):
                rule = rule_of(view, str(request.method))
                self.message = rule.refusal() if rule else "This action needs a role."
                return False
            return True
        return super().has_permission(request, view)


def check_in_scope(request: Request, view: Any, cluster: str, namespace: str) -> None:
    """403 unless the user holds the action's role in `cluster`/`namespace`."""
    rule = rule_of(view, str(request.method))
    if rule is None:
        raise PermissionDenied("This action is not allowed for anyone.")
    if not permissions.may_in(request.user, rule.resource, rule.action, cluster, namespace):
        raise PermissionDenied(
            permissions.refusal_in(rule.resource, rule.action, cluster, namespace)
        )
