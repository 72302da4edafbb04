"""Role checks for the cluster-mode API (clusters, mirrored objects, their actions).

Scoped users hold no console-wide role (issuance.roles.roles_of), so RolePermission refuses
them everywhere else. Here the role is checked against the roles *granted* (the view then
checks the scope: an object outside it answers 404, an action without the role in the
object's scope 403); administration (adding, changing, deleting clusters) still needs the
console-wide admin role, which a scoped user never has. Views list in `object_roles` the
actions whose role depends on the object (renew, approve, deny): those are checked by the
view once the object is found.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from issuance.api.permissions import ADMIN, RolePermission, required_role
from issuance.roles import granted_roles, has_role


class ScopedRolePermission(RolePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not user or not user.is_authenticated:
            return False
        action = getattr(view, "action", None)
        if action and action in getattr(view, "object_roles", {}):
            # Checked by the view against the object's cluster/namespace, after the lookup:
            # an object outside the scope answers 404 first, whatever the role.
            if not granted_roles(user):
                self.message = "This action needs a role."
                return False
            return True
        role = required_role(request, view)
        if role is None and not hasattr(view, str(request.method).lower()):
            return bool(granted_roles(user))  # the honest 405 for anyone with a role
        if role is None:
            self.message = "This action is not allowed for anyone."
            return False
        held = has_role(user, role) if role == ADMIN else role in granted_roles(user)
        if not held:
            self.message = f"This action needs the {role} role."
            return False
        return True
