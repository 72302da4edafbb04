"""Console users: created with a one-time password, given roles, disabled and re-enabled.

The same functions for the console's Users page and any later API, so the rule that the
system keeps an admin holds wherever a user is changed.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from issuance.access.roles import ADMIN, ROLES, granted_roles, role_groups
from issuance.models import Cluster, PasswordChangeRequired, RoleScope
from issuance.observability import events


class UserError(ValueError):
    """A change refused, with the field it concerns ("username", "roles", "active")."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def one_time_password() -> str:
    """A generated password (~128 bits), shown once to the admin who created the user."""
    return secrets.token_urlsafe(16)


def _admins(exclude_pk: int | None = None) -> int:
    """Active users holding the admin role (the group, or superuser), except one."""
    found = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name=ADMIN))
    )
    if exclude_pk is not None:
        found = found.exclude(pk=exclude_pk)
    return found.distinct().count()


def _clean_roles(roles: Iterable[str]) -> list[str]:
    chosen = sorted(set(roles))
    unknown = [r for r in chosen if r not in ROLES]
    if unknown:
        raise UserError("roles", f"unknown roles: {', '.join(unknown)}")
    return chosen


def create_user(username: str, roles: Iterable[str], *, actor: str) -> tuple[AbstractUser, str]:
    """A new active user with the roles; returns it and its generated password."""
    username = username.strip()
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError as exc:
        raise UserError("username", " ".join(exc.messages)) from exc
    if not username or len(username) > 150:
        raise UserError("username", "a username is 1 to 150 characters")
    chosen = _clean_roles(roles)
    model = get_user_model()
    password = one_time_password()
    with transaction.atomic():
        if model.objects.filter(username__iexact=username).exists():
            raise UserError("username", f"a user named {username!r} exists")
        user: AbstractUser = model.objects.create_user(username=username, password=password)
        user.groups.set(role_groups(chosen))
        # The admin saw the generated password: the user chooses their own at first sign-in.
        PasswordChangeRequired.objects.create(user_id=user.pk, set_by=actor)
        events.record(
            "User", username, "UserCreated", f"roles: {', '.join(chosen) or 'none'}", actor=actor
        )
    return user, password


def _locked(user_pk: int) -> AbstractUser:
    # The admin group's row serializes changes of users (on PostgreSQL): two admins
    # demoting each other at once cannot both pass the last-admin check.
    Group.objects.select_for_update().filter(name=ADMIN).first()
    user: AbstractUser = get_user_model().objects.select_for_update().get(pk=user_pk)
    return user


def _would_leave_no_admin(user: AbstractUser, *, active: bool, admin: bool) -> bool:
    if active and (admin or user.is_superuser):
        return False
    return _admins(exclude_pk=user.pk) == 0


def set_roles(user_pk: int, roles: Iterable[str], *, actor: str) -> AbstractUser:
    chosen = _clean_roles(roles)
    with transaction.atomic():
        user = _locked(user_pk)
        if _would_leave_no_admin(user, active=user.is_active, admin=ADMIN in chosen):
            raise UserError("roles", "this would leave no active admin")
        if ADMIN in chosen and RoleScope.objects.filter(user_id=user.pk).exists():
            raise UserError(
                "roles", "an admin cannot be limited to clusters: remove the scopes first"
            )
        user.groups.set(role_groups(chosen))
        events.record(
            "User",
            user.get_username(),
            "RolesChanged",
            f"roles: {', '.join(chosen) or 'none'}",
            actor=actor,
        )
    return user


def set_active(user_pk: int, active: bool, *, actor: str) -> AbstractUser:
    """Disable (sessions and API tokens stop working at the next request) or re-enable."""
    with transaction.atomic():
        user = _locked(user_pk)
        is_admin = user.groups.filter(name=ADMIN).exists()
        if not active and _would_leave_no_admin(user, active=False, admin=is_admin):
            raise UserError("active", "this would leave no active admin")
        if user.is_active != active:
            user.is_active = active
            user.save(update_fields=["is_active"])
            events.record(
                "User",
                user.get_username(),
                "UserEnabled" if active else "UserDisabled",
                "",
                actor=actor,
            )
    return user


# A namespace is a DNS label (RFC 1123), as Kubernetes requires.
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def parse_scopes(text: str) -> list[tuple[str, str]]:
    """ "prod/team-a, staging" (commas, spaces or lines) -> [("prod", "team-a"), ("staging", "")].

    Raises UserError("scopes") naming the first entry that is not CLUSTER or CLUSTER/NAMESPACE
    of a known cluster.
    """
    entries = [e for e in re.split(r"[\s,]+", text.strip()) if e]
    known = set(
        Cluster.objects.filter(name__in={e.split("/")[0] for e in entries}).values_list(
            "name", flat=True
        )
    )
    out: list[tuple[str, str]] = []
    for entry in entries:
        cluster, _, namespace = entry.partition("/")
        if cluster not in known:
            raise UserError("scopes", f"{entry!r}: there is no cluster named {cluster!r}")
        if "/" in entry and not _NAMESPACE.match(namespace):
            raise UserError(
                "scopes", f"{entry!r}: {namespace!r} is not a Kubernetes namespace name"
            )
        if (cluster, namespace) not in out:
            out.append((cluster, namespace))
    return out


def set_scopes(user_pk: int, scopes: Iterable[tuple[str, str]], *, actor: str) -> AbstractUser:
    """Limit the user's roles to these (cluster, namespace) pairs; none = unscoped.

    A scoped user sees and acts on mirrored objects in their scopes only, and on none of the
    console's own resources (issuance/access/scope.py). Admins cannot be scoped.
    """
    chosen = sorted(set(scopes))
    with transaction.atomic():
        user = _locked(user_pk)
        if chosen and (user.is_superuser or ADMIN in granted_roles(user)):
            raise UserError(
                "scopes", "an admin cannot be limited to clusters: remove the admin role first"
            )
        clusters = dict(
            Cluster.objects.filter(name__in={c for c, _ in chosen}).values_list("name", "pk")
        )
        missing = sorted({c for c, _ in chosen} - set(clusters))
        if missing:
            raise UserError("scopes", f"there is no cluster named {missing[0]!r}")
        RoleScope.objects.filter(user_id=user.pk).delete()
        RoleScope.objects.bulk_create(
            RoleScope(user_id=user.pk, cluster_id=clusters[c], namespace=ns) for c, ns in chosen
        )
        described = ", ".join(f"{c}/{ns}" if ns else f"{c} (all namespaces)" for c, ns in chosen)
        events.record(
            "User",
            user.get_username(),
            "ScopesChanged",
            f"limited to {described}" if chosen else "unscoped: roles apply everywhere",
            actor=actor,
        )
    return user


def scopes_text(user_pk: int) -> str:
    """The user's scopes as the Users page shows and takes them."""
    return ", ".join(
        f"{c}/{ns}" if ns else c
        for c, ns in RoleScope.objects.filter(user_id=user_pk).values_list(
            "cluster__name", "namespace"
        )
    )
