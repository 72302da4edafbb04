"""Role checks for console views: every page needs a role, every action its own."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from issuance.clusters.scope import has_scoped_role, scope_of, sees_own_resources
from issuance.models import Cluster
from issuance.roles import ADMIN, APPROVER, OPERATOR, VIEWER, granted_roles, roles_of

View = Callable[..., HttpResponse]


def _requiring(role: str, holds: Callable[[Any], frozenset[str]]) -> Callable[[View], View]:
    """Anonymous users go to the login page; logged-in users whose `holds(user)` lacks the
    role get 403."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if role not in holds(request.user):
                raise PermissionDenied(f"the {role} role is required")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


def require_role(role: str) -> Callable[[View], View]:
    """For the console's own pages: the role held console-wide (roles_of; a user scoped to
    clusters/namespaces holds none)."""
    return _requiring(role, roles_of)


viewer_required = require_role(VIEWER)
operator_required = require_role(OPERATOR)
approver_required = require_role(APPROVER)
admin_required = require_role(ADMIN)


def mirror_role_required(role: str) -> Callable[[View], View]:
    """For pages and actions on mirrored cluster objects: the role held anywhere, console-wide
    or scoped to clusters/namespaces (granted_roles). The view itself narrows what it shows
    with scope.visible() and answers 404 for objects outside the scope; actions on one
    object check has_scoped_role() there too."""
    return _requiring(role, granted_roles)


mirror_viewer_required = mirror_role_required(VIEWER)
mirror_operator_required = mirror_role_required(OPERATOR)
mirror_approver_required = mirror_role_required(APPROVER)


def role_flags(request: HttpRequest) -> dict[str, bool]:
    """What the templates may offer: buttons are only rendered for users who may press them.

    `mirror_only`: a scoped user, who sees mirrored objects in their scope and none of the
    console's own pages (the nav hides them). `sees_clusters`: the Clusters page and the
    mirrored objects are open to the user."""
    roles = roles_of(request.user)
    return {
        "can_operate": OPERATOR in roles,
        "can_approve": APPROVER in roles,
        "can_admin": ADMIN in roles,
        "mirror_only": not sees_own_resources(request.user),
        "sees_clusters": VIEWER in granted_roles(request.user),
    }


def mirror_flags(request: HttpRequest, cluster: str, namespace: str) -> dict[str, bool]:
    """The buttons for one mirrored object: the role in that object's cluster/namespace."""
    user = request.user
    return {
        "can_renew": has_scoped_role(user, OPERATOR, cluster, namespace),
        "can_decide": has_scoped_role(user, APPROVER, cluster, namespace),
    }


def mirror_live_groups(request: HttpRequest, *own_groups: str) -> str:
    """The body's live groups on a page that also shows mirrored objects: the console's own
    groups for users who see own resources, else the user's cluster topics only. Sections
    showing mirrored rows add `mirror_topics` (render_page) to their data-live-topics."""
    if sees_own_resources(request.user):
        return " ".join(own_groups)
    return " ".join(scope_of(request.user).topics())


def mirror_topics(request: HttpRequest) -> str:
    """The live topics of mirrored objects for the user's sections: none while no cluster
    is configured (nothing to hear of, and older live servers refuse unknown topics)."""
    scope = scope_of(request.user)
    if scope.everything and not Cluster.objects.exists():
        return ""
    return " ".join(scope.topics())


def render_page(
    request: HttpRequest,
    template_name: str,
    context: dict[str, Any],
    *,
    live_groups: str = "dashboard",
    status: int = 200,
) -> HttpResponse:
    """Render a full page: adds the role flags and the page's live groups for base.html."""
    return render(
        request,
        template_name,
        {
            **role_flags(request),
            "live_groups": live_groups,
            # Sections showing mirrored objects subscribe to these too.
            "mirror_topics": mirror_topics(request),
            **context,
        },
        status=status,
    )
