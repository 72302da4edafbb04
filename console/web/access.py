"""Role checks for console views: every page needs a role, every action its own."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from issuance.roles import ADMIN, APPROVER, OPERATOR, VIEWER, has_role, roles_of

View = Callable[..., HttpResponse]


def require_role(role: str) -> Callable[[View], View]:
    """Anonymous users go to the login page; logged-in users without the role get 403."""

    def decorator(view: View) -> View:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"the {role} role is required")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


viewer_required = require_role(VIEWER)
operator_required = require_role(OPERATOR)
approver_required = require_role(APPROVER)
admin_required = require_role(ADMIN)


def role_flags(request: HttpRequest) -> dict[str, bool]:
    """What the templates may offer: buttons are only rendered for users who may press them."""
    roles = roles_of(request.user)
    return {
        "can_operate": OPERATOR in roles,
        "can_approve": APPROVER in roles,
        "can_admin": ADMIN in roles,
    }


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
        {**role_flags(request), "live_groups": live_groups, **context},
        status=status,
    )
