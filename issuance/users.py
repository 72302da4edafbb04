"""Console users: created with a one-time password, given roles, disabled and re-enabled.

The same functions for the console's Users page and any later API, so the rule that the
system keeps an admin holds wherever a user is changed.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from issuance import events
from issuance.roles import ADMIN, ROLES


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
        user.groups.set(Group.objects.filter(name__in=chosen))
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
        user.groups.set(Group.objects.filter(name__in=chosen))
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
