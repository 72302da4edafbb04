"""Second factor for local accounts: TOTP devices and single-use recovery codes (django-otp).

Who must have a factor is REQUIRE_2FA (`admins`, `all`, `none`). A user's factor is one
confirmed TOTPFactor (its secret encrypted at rest); their recovery codes are one
RecoveryCodeSet (keyed digests only, each deleted when used): issuance/models/secondfactor.py. Enrolment, new recovery codes, the use of a recovery code and an admin's reset
are in the audit log (kind "User"); wrong codes are counted and recorded by the sign-in
protection (console/signin_steps.py sends them as failed sign-ins, so they count toward
the same lock as wrong passwords).

The web pages are console/web/two_factor.py; this module holds the rules, so any later API
reuses them.
"""

from __future__ import annotations

import json
import secrets
from typing import Any, Literal, cast

import django_otp
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from issuance.access.roles import ADMIN, granted_roles
from issuance.models import Event, RecoveryCode, RecoveryCodeSet, TOTPFactor
from issuance.observability import events
from issuance.pki.encryption import DecryptionError, decrypt_text, encrypt_text

KIND = "User"
ENROLLED = "SecondFactorEnrolled"
RECOVERY_CODES_CREATED = "RecoveryCodesCreated"
RECOVERY_CODE_USED = "RecoveryCodeUsed"
RESET = "SecondFactorReset"

DEVICE_NAME = "Authenticator app"
RECOVERY_DEVICE_NAME = "Recovery codes"
RECOVERY_CODE_COUNT = 10
# 10 base32 characters: 50 bits each, shown as two groups of five ("abcde-fghij").
_CODE_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
_CODE_LENGTH = 10

Policy = Literal["admins", "all", "none"]
Verified = Literal["totp", "recovery"]


def policy() -> Policy:
    # Parsed and checked from the environment (issuance.environment.REQUIRE_2FA).
    return cast(Policy, settings.REQUIRE_2FA)


def must_have_factor(user: Any) -> bool:
    """Whether REQUIRE_2FA asks this user for a second factor."""
    chosen = policy()
    if chosen == "all":
        return True
    if chosen == "admins":
        return bool(getattr(user, "is_superuser", False)) or ADMIN in granted_roles(user)
    return False


def totp_device(user: Any) -> TOTPFactor | None:
    """The user's confirmed authenticator (None: no second factor)."""
    device: TOTPFactor | None = TOTPFactor.objects.filter(user_id=user.pk, confirmed=True).first()
    return device


def has_factor(user: Any) -> bool:
    found: bool = TOTPFactor.objects.filter(user_id=user.pk, confirmed=True).exists()
    return found


def recovery_codes_left(user: Any) -> int:
    left: int = RecoveryCode.objects.filter(device__user_id=user.pk, device__confirmed=True).count()
    return left


def pending_device(user: Any) -> TOTPFactor:
    """The unconfirmed device of an enrolment under way (made once, so a reload of the set-up
    page shows the same secret the user may already have scanned)."""
    device: TOTPFactor | None = TOTPFactor.objects.filter(user_id=user.pk, confirmed=False).first()
    if device is None:
        device = TOTPFactor.objects.create(user=user, name=DEVICE_NAME, confirmed=False)
    return device


def manual_key(device: TOTPFactor) -> str:
    """The secret as base32 in groups of four, for typing into an app instead of scanning."""
    from base64 import b32encode

    text = b32encode(device.bin_key).decode("ascii").rstrip("=")
    return " ".join(text[i : i + 4] for i in range(0, len(text), 4))


def _new_code() -> str:
    return "".join(secrets.choice(_CODE_ALPHABET) for _ in range(_CODE_LENGTH))


def display_code(code: str) -> str:
    return f"{code[:5]}-{code[5:]}"


def _normalize(token: str) -> str:
    return "".join(token.split()).replace("-", "").lower()


def _replace_recovery_codes(user: Any) -> list[str]:
    RecoveryCodeSet.objects.filter(user_id=user.pk).delete()
    device = RecoveryCodeSet.objects.create(user=user, name=RECOVERY_DEVICE_NAME, confirmed=True)
    codes = [_new_code() for _ in range(RECOVERY_CODE_COUNT)]
    # Only their digests are stored: the list returned here is the one time they are seen.
    device.add_codes(codes)
    return [display_code(code) for code in codes]


def seal_codes(codes: list[str]) -> str:
    """New codes encrypted for the one request that shows them (the session, which is kept in
    the database, never holds them in clear; see console/web/two_factor.py)."""
    return encrypt_text(json.dumps(codes))


def unseal_codes(sealed: object) -> list[str] | None:
    if not isinstance(sealed, str):
        return None
    try:
        codes = json.loads(decrypt_text(sealed))
    except (DecryptionError, ValueError):
        return None
    return [str(code) for code in codes] if isinstance(codes, list) else None


def confirm_enrolment(user: Any, device: TOTPFactor, token: str) -> list[str] | None:
    """Confirms the device with a code from the app; returns the new recovery codes (to be
    shown once), or None when the code is wrong."""
    with transaction.atomic():
        locked = TOTPFactor.objects.select_for_update().get(pk=device.pk)
        if locked.user_id != user.pk or locked.confirmed or not locked.verify_token(token.strip()):
            return None
        # One factor per user: an older confirmed device (none, unless two set-ups raced)
        # goes with the new one's confirmation.
        TOTPFactor.objects.filter(user_id=user.pk).exclude(pk=locked.pk).delete()
        locked.confirmed = True
        locked.save(update_fields=["confirmed"])
        codes = _replace_recovery_codes(user)
        events.record(
            KIND,
            user.get_username(),
            ENROLLED,
            f"Second factor set up (authenticator app), {len(codes)} recovery codes made.",
            actor=user.get_username(),
        )
    device.confirmed = True
    return codes


def new_recovery_codes(user: Any) -> list[str]:
    """Replaces the user's recovery codes (the old ones stop working)."""
    with transaction.atomic():
        codes = _replace_recovery_codes(user)
        events.record(
            KIND,
            user.get_username(),
            RECOVERY_CODES_CREATED,
            f"{len(codes)} new recovery codes; the earlier ones no longer work.",
            actor=user.get_username(),
        )
    return codes


def verify(user: Any, token: str) -> tuple[Verified, Any] | None:
    """Checks a code from the authenticator or a recovery code; returns which and the device
    that took it (a recovery code is used up), or None."""
    token = token.strip()
    device = totp_device(user)
    if device is None:
        return None
    if token.isdigit() and len(token) == device.digits:
        found = django_otp.verify_token(user, device.persistent_id, token)
        return ("totp", found) if found is not None else None
    code = _normalize(token)
    if len(code) != _CODE_LENGTH:
        return None
    for static in RecoveryCodeSet.objects.filter(user_id=user.pk, confirmed=True):
        # verify_token locks the device row: a code is taken once even by two requests at once.
        found = django_otp.verify_token(user, static.persistent_id, code)
        if found is not None:
            left = recovery_codes_left(user)
            events.record(
                KIND,
                user.get_username(),
                RECOVERY_CODE_USED,
                f"Signed in with a recovery code; {left} left.",
                actor=user.get_username(),
                type_=Event.WARNING,
            )
            return "recovery", found
    return None


def reset(user_pk: int, *, actor: str) -> Any:
    """An admin removes a user's second factor and recovery codes; at their next sign-in the
    user sets one up again if REQUIRE_2FA asks them to."""
    with transaction.atomic():
        user = get_user_model().objects.get(pk=user_pk)
        removed, _ = TOTPFactor.objects.filter(user_id=user.pk).delete()
        RecoveryCodeSet.objects.filter(user_id=user.pk).delete()
        events.record(
            KIND,
            user.get_username(),
            RESET,
            "Second factor and recovery codes removed by an admin."
            if removed
            else "Second factor reset (the user had none set up).",
            actor=actor,
            type_=Event.WARNING,
        )
    return user


def password_exchange_refusal(user: Any) -> str | None:
    """Why POST /api/v1/token/ may not give this user a token for a password alone, or None.

    A password must not be enough where the console asks for more: a user with a second
    factor, one the policy asks for a factor (not set up yet), or one whose password an admin
    set. They create tokens in the console, after a full sign-in."""
    from issuance.access import passwords

    if has_factor(user) or must_have_factor(user):
        return (
            "This account signs in with a second factor, so a password alone does not get an "
            "API token: sign in to the console and create one under your name → API tokens."
        )
    if passwords.must_change(user):
        return (
            "This account's password was set by an admin: sign in to the console and choose "
            "your own first (then create a token there, or ask here again)."
        )
    return None
