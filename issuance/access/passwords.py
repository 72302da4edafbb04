"""Local passwords: the flag that makes a user choose their own at the next sign-in, and an
admin's reset (a generated one-time password, shown once to that admin).

A user an admin created, or whose password an admin reset, has a PasswordChangeRequired row
until they change it; console/signin_steps.py keeps them on the password change page
until then, and POST /api/v1/token/ refuses their password. Changes and resets are in the
audit log (kind "User"; never a password).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from issuance.access.users import one_time_password
from issuance.models import PasswordChangeRequired
from issuance.observability import events

KIND = "User"
CHANGED = "PasswordChanged"
RESET = "PasswordReset"


def must_change(user: Any) -> bool:
    return PasswordChangeRequired.objects.filter(user_id=user.pk).exists()


def require_change(user: Any, *, actor: str) -> None:
    PasswordChangeRequired.objects.update_or_create(user_id=user.pk, defaults={"set_by": actor})


def changed(user: Any) -> None:
    """After the user set a new password themselves: the flag goes, the change is audited."""
    PasswordChangeRequired.objects.filter(user_id=user.pk).delete()
    events.record(
        KIND,
        user.get_username(),
        CHANGED,
        "Password changed by the user.",
        actor=user.get_username(),
    )


def reset(user_pk: int, *, actor: str) -> tuple[Any, str]:
    """An admin gives the user a new generated password (returned, to be shown once); the
    user must change it at their next sign-in. The user's sessions end (Django ties a
    session to the password), their API tokens stay."""
    password = one_time_password()
    with transaction.atomic():
        user = get_user_model().objects.select_for_update().get(pk=user_pk)
        user.set_password(password)
        user.save(update_fields=["password"])
        require_change(user, actor=actor)
        events.record(
            KIND,
            user.get_username(),
            RESET,
            "Password reset by an admin; the user must change it at the next sign-in.",
            actor=actor,
        )
    return user, password
