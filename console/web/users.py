"""Users (admin): create with a one-time password, assign roles, disable and re-enable.

Acts through issuance/access/users.py (which keeps at least one active admin); the generated
password is in the one response that created the user and nowhere else.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.models import Group, User
from django.core.paginator import Paginator
from django.db.models import Prefetch
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web import shown_once
from console.web.access import permission_required, render_page
from issuance.access import users
from issuance.access.roles import ROLES
from issuance.models import Cluster, PasswordChangeRequired, RoleScope, TOTPFactor

PAGE_SIZE = 50
ROLE_CHOICES = [(r, r) for r in ROLES]


class NewUserForm(forms.Form):
    username = forms.CharField(max_length=150)
    roles = forms.MultipleChoiceField(
        choices=ROLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )


class RolesForm(forms.Form):
    roles = forms.MultipleChoiceField(
        choices=ROLE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple
    )


def context(request: HttpRequest, form: NewUserForm | None = None) -> dict[str, Any]:
    everyone = User.objects.order_by("username").prefetch_related(
        Prefetch("groups", queryset=Group.objects.only("id", "name")),
        Prefetch("role_scopes", queryset=RoleScope.objects.select_related("cluster")),
    )
    page = Paginator(everyone, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [
        (
            u,
            sorted({g.name for g in u.groups.all()} | ({"admin"} if u.is_superuser else set())),
            ", ".join(str(scope).removesuffix("/*") for scope in u.role_scopes.all()),
        )
        for u in page.object_list
    ]
    on_page = [u.pk for u in page.object_list]
    return {
        "page": page,
        "rows": rows,
        # Which users have a second factor, and which must change their password (two
        # queries whatever the page size).
        "with_factor": set(
            TOTPFactor.objects.filter(user_id__in=on_page, confirmed=True).values_list(
                "user_id", flat=True
            )
        ),
        "must_change": set(
            PasswordChangeRequired.objects.filter(user_id__in=on_page).values_list(
                "user_id", flat=True
            )
        ),
        "roles": ROLES,
        "form": form or NewUserForm(),
        "me": request.user.pk,
        "has_clusters": Cluster.objects.exists(),
    }


@never_cache
@permission_required("user", "read")
def user_list(request: HttpRequest) -> HttpResponse:
    shown = context(request)
    created = shown_once.take(request, "user")
    if created is not None:
        shown["created"] = User.objects.filter(pk=created["id"]).first()
        shown["password"] = created["secret"]
    reset = shown_once.take(request, "password-reset")
    if reset is not None:
        shown["reset_user"] = User.objects.filter(pk=reset["id"]).first()
        shown["password"] = reset["secret"]
    return render_page(request, "console/users.html", shown)


@require_POST
@never_cache
@permission_required("user", "create")
def user_create(request: HttpRequest) -> HttpResponse:
    form = NewUserForm(request.POST)
    if form.is_valid():
        try:
            user, password = users.create_user(
                form.cleaned_data["username"],
                form.cleaned_data["roles"],
                actor=request.user.get_username(),
            )
        except users.UserError as exc:
            form.add_error(exc.field if exc.field in form.fields else None, str(exc))
        else:
            # Post/redirect/get: the list shows the password once (console/web/shown_once.py).
            shown_once.keep(request, "user", user.pk, password)
            return redirect("web:users")
    return render_page(request, "console/users.html", context(request, form), status=400)


@require_POST
@permission_required("user", "change")
def user_roles(request: HttpRequest, pk: int) -> HttpResponse:
    user = get_object_or_404(User, pk=pk)
    form = RolesForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"{user.username}: unknown role")
        return redirect("web:users")
    try:
        users.set_roles(user.pk, form.cleaned_data["roles"], actor=request.user.get_username())
    except users.UserError as exc:
        messages.error(request, f"{user.username}: {exc}")
    else:
        messages.success(request, f"Roles of {user.username} saved.")
    return redirect("web:users")


def _set_active(request: HttpRequest, pk: int, active: bool) -> HttpResponse:
    user = get_object_or_404(User, pk=pk)
    try:
        users.set_active(user.pk, active, actor=request.user.get_username())
    except users.UserError as exc:
        messages.error(request, f"{user.username}: {exc}")
    else:
        state = "re-enabled" if active else "disabled (its sessions and API tokens stop working)"
        messages.success(request, f"{user.username} {state}.")
    return redirect("web:users")


@require_POST
@permission_required("user", "change")
def user_disable(request: HttpRequest, pk: int) -> HttpResponse:
    return _set_active(request, pk, active=False)


@require_POST
@permission_required("user", "change")
def user_enable(request: HttpRequest, pk: int) -> HttpResponse:
    return _set_active(request, pk, active=True)


@require_POST
@permission_required("user", "change")
def user_scopes(request: HttpRequest, pk: int) -> HttpResponse:
    """Limit a user's roles to clusters/namespaces ("prod/team-a, staging"); empty = unscoped."""
    user = get_object_or_404(User, pk=pk)
    try:
        scopes = users.parse_scopes(str(request.POST.get("scopes", "")))
        users.set_scopes(user.pk, scopes, actor=request.user.get_username())
    except users.UserError as exc:
        messages.error(request, f"{user.username}: scopes not saved: {exc}")
    else:
        messages.success(request, f"Scopes of {user.username} saved.")
    return redirect("web:users")
