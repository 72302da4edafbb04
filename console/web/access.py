"""Role checks for console views: every page needs a role, every action its own."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar, cast

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render

from issuance.access import permissions
from issuance.access.permissions import Rule
from issuance.access.roles import ADMIN, APPROVER, OPERATOR, VIEWER, granted_roles, roles_of
from issuance.access.scope import scope_of, sees_own_resources
from issuance.models import Cluster

View = Callable[..., HttpResponse]
AnyView = TypeVar("AnyView", bound=Callable[..., HttpResponseBase])


def _refuse(request: HttpRequest, rule: Rule) -> HttpResponse | None:
    """None when the user holds the rule; else the login page (anonymous) or 403."""
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not rule.held_by(request.user):
        raise PermissionDenied(rule.refusal())
    return None


def permission_required(
    resource: str, action: str, *alternatives: str, post: str | None = None
) -> Callable[[AnyView], AnyView]:
    """The view needs the table's (resource, action) (issuance.access.permissions).

    `alternatives` are further resources whose same action also opens the view: the lists
    that show mirrored objects beside the console's own (`"mirrored-object"`), whose view
    narrows what it shows. `post`: the resource's action a POST needs (a form that viewers
    read and admins save). Anonymous users go to the login page, users without the role get
    403 naming it. The rules are looked up here, at import time: a typo fails at startup."""
    rules = [permissions.rule(resource, action)] + [
        permissions.rule(other, action) for other in alternatives
    ]
    post_rule = permissions.rule(resource, post) if post else None

    def decorator(view: AnyView) -> AnyView:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            refused = None
            if post_rule is not None and request.method == "POST":
                refused = _refuse(request, post_rule)
            elif not any(rule.held_by(request.user) for rule in rules[1:]):
                refused = _refuse(request, rules[0])
            return refused if refused is not None else view(request, *args, **kwargs)

        # What tests/access/test_permission_matrix.py reads: every console URL names its rules.
        wrapped.permission_rules = tuple(rules)  # type: ignore[attr-defined]
        wrapped.permission_post_rule = post_rule  # type: ignore[attr-defined]
        return cast(AnyView, wrapped)

    return decorator


def check_in_scope(
    request: HttpRequest, resource: str, action: str, cluster: str, namespace: str
) -> None:
    """An in-scope action on one mirrored object: 403 naming the role and the place unless
    the user holds it there (issuance.access.permissions.may_in)."""
    if not permissions.may_in(request.user, resource, action, cluster, namespace):
        raise PermissionDenied(permissions.refusal_in(resource, action, cluster, namespace))


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
        "can_read_keys": permissions.may(request.user, "certificate", "read-key"),
        "mirror_only": not sees_own_resources(request.user),
        "sees_clusters": VIEWER in granted_roles(request.user),
    }


def mirror_flags(request: HttpRequest, cluster: str, namespace: str) -> dict[str, bool]:
    """The buttons for one mirrored object: the role in that object's cluster/namespace."""
    user = request.user
    return {
        "can_renew": permissions.may_in(user, "mirrored-object", "renew", cluster, namespace),
        "can_decide": permissions.may_in(user, "mirrored-object", "approve", cluster, namespace),
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
