"""Console accounts for people who sign in through an OpenID Provider.

The web side (console/web/oidc.py) checks the provider's answer (state, PKCE, the ID token's
signature, issuer, audience, expiry and nonce, through Authlib) and hands the verified claims
here. This module finds the user linked to the claims' (issuer, sub), or creates one on the
first sign-in, and applies the roles and scopes the user's groups give
(issuance/access/oidc_mapping.py) at every sign-in, so a change at the provider applies at
the next one. It refuses, with a reason for the audit log and a sentence for the person:

- a user whose groups give no role (a known user also loses their roles then);
- a username that belongs to a console account not linked to this provider account (a
  local user is never taken over by someone who picked the same name at the provider);
- a disabled account, or claims without `sub` or the username claim.

Accounts made here have no usable password: they sign in through the provider only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import AbstractUser, User
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import HttpRequest
from django.utils import timezone

from issuance.access.oidc_mapping import Grant, resolve
from issuance.access.roles import role_groups
from issuance.models import Cluster, OidcIdentity, RoleScope
from issuance.observability import events

ACTOR = "single sign-on"

# Audit reasons (kind "SignIn", issuance/access/signin.py): a sign-in, and one per refusal.
SIGNED_IN = "SsoSignedIn"
REFUSED_NO_ROLE = "SsoRefusedNoRole"
REFUSED_USERNAME_TAKEN = "SsoRefusedUsernameTaken"
REFUSED_DISABLED = "SsoRefusedDisabled"
REFUSED_CLAIMS = "SsoRefusedClaims"
REFUSED_TOKEN = "SsoRefusedToken"  # noqa: S105 - an audit reason, not a secret


@dataclass
class Refused(Exception):
    """A sign-in refused: `reason` for the audit log, `message` for the person."""

    reason: str
    message: str
    username: str = ""
    # For the audit entry only: what an admin needs to act (the provider account's sub).
    detail: str = ""

    def __str__(self) -> str:
        return self.message


def groups_of(claims: Mapping[str, Any], claim: str) -> list[str]:
    """The groups claim as a list of strings (a lone string is one group; other shapes none)."""
    value = claims.get(claim)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(item) for item in value if isinstance(item, (str, int))]
    return []


def _username(claims: Mapping[str, Any], claim: str) -> str:
    value = claims.get(claim)
    if not isinstance(value, str) or not value.strip():
        raise Refused(
            REFUSED_CLAIMS,
            f"The provider did not send the {claim!r} claim that names your console account.",
        )
    username = value.strip()
    try:
        UnicodeUsernameValidator()(username)
    except ValidationError as exc:
        raise Refused(
            REFUSED_CLAIMS,
            f"The provider's {claim!r} ({username!r}) is not a valid console username.",
            username,
        ) from exc
    if len(username) > 150:
        raise Refused(REFUSED_CLAIMS, "The username from the provider is too long.", username)
    return username


def _apply(user: AbstractUser, grant: Grant) -> None:
    """Sets the user's roles and scopes to the grant; audited when they change."""
    wanted_roles = sorted(grant.roles)
    had_roles = sorted(user.groups.values_list("name", flat=True))
    if wanted_roles != had_roles:
        user.groups.set(role_groups(wanted_roles))
        events.record(
            "User",
            user.get_username(),
            "RolesChanged",
            f"roles: {', '.join(wanted_roles) or 'none'} (from the provider's groups)",
            actor=ACTOR,
        )
    had_scopes = set(
        RoleScope.objects.filter(user_id=user.pk).values_list("cluster__name", "namespace")
    )
    if had_scopes != set(grant.scopes):
        clusters = dict(
            Cluster.objects.filter(name__in={c for c, _ in grant.scopes}).values_list("name", "pk")
        )
        RoleScope.objects.filter(user_id=user.pk).delete()
        RoleScope.objects.bulk_create(
            RoleScope(user_id=user.pk, cluster_id=clusters[c], namespace=ns)
            for c, ns in sorted(grant.scopes)
            if c in clusters
        )
        described = ", ".join(f"{c}/{ns}" if ns else c for c, ns in sorted(grant.scopes))
        events.record(
            "User",
            user.get_username(),
            "ScopesChanged",
            f"limited to {described}" if described else "unscoped: roles apply everywhere",
            actor=ACTOR,
        )


def sign_in(
    issuer: str, claims: Mapping[str, Any], *, username_claim: str, groups_claim: str
) -> tuple[AbstractUser, Grant]:
    """The console user for these verified claims, with their roles applied (docstring)."""
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise Refused(REFUSED_CLAIMS, "The provider's answer names no account (no 'sub').")
    grant = resolve(groups_of(claims, groups_claim))
    model = get_user_model()
    with transaction.atomic():
        identity = (
            OidcIdentity.objects.select_for_update()
            .select_related("user")
            .filter(issuer=issuer, subject=subject)
            .first()
        )
        if identity is not None:
            user: AbstractUser = identity.user
            if not user.is_active:
                raise Refused(
                    REFUSED_DISABLED, "Your console account is disabled.", user.get_username()
                )
            if not grant.roles:
                _apply(user, grant)  # committed, though the sign-in is refused below
        else:
            username = _username(claims, username_claim)
            if model.objects.filter(username__iexact=username).exists():
                raise Refused(
                    REFUSED_USERNAME_TAKEN,
                    f"A console account named {username!r} exists and is not linked to "
                    "your provider account; ask an admin.",
                    username,
                    f"provider account sub {subject} (manage.py oidc_link links it)",
                )
            if not grant.roles:
                raise Refused(
                    REFUSED_NO_ROLE,
                    "None of your groups gives a role in this console; ask an admin.",
                    username,
                    f"groups: {', '.join(groups_of(claims, groups_claim)) or 'none'}",
                )
            try:
                with transaction.atomic():
                    user = model.objects.create_user(username=username, password=None)
                    identity = OidcIdentity.objects.create(
                        user=user, issuer=issuer, subject=subject
                    )
            except IntegrityError as exc:  # the same first sign-in twice at once
                raise Refused(
                    REFUSED_USERNAME_TAKEN, "Your account was being created; try again.", username
                ) from exc
            events.record(
                "User",
                username,
                "UserCreated",
                f"on first sign-in through the provider (sub {subject} at {issuer})",
                actor=ACTOR,
            )
    if not grant.roles:  # a known user: their roles were removed above, and stay removed
        raise Refused(
            REFUSED_NO_ROLE,
            "None of your groups gives a role in this console; ask an admin.",
            user.get_username(),
        )
    with transaction.atomic():
        _apply(user, grant)
        OidcIdentity.objects.filter(pk=identity.pk).update(last_sign_in=timezone.now())
    return user, grant


def link(username: str, issuer: str, subject: str, *, actor: str) -> OidcIdentity:
    """Links an existing console account to a provider account (its `sub`), so that the
    person signs in to it through the provider (a local account otherwise refuses the
    provider's user of the same name). Audited; one provider account links to one user."""
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise ValueError(f"no user named {username!r}")
    if not subject.strip():
        raise ValueError("the provider account's sub is empty")
    with transaction.atomic():
        taken = OidcIdentity.objects.filter(issuer=issuer, subject=subject).first()
        if taken is not None and taken.user_id != user.pk:
            raise ValueError(f"sub {subject!r} is linked to {taken.user.get_username()!r} already")
        identity, _ = OidcIdentity.objects.get_or_create(
            issuer=issuer, subject=subject, defaults={"user": user}
        )
        events.record(
            "User",
            user.get_username(),
            "LinkedToProvider",
            f"linked to sub {subject} at {issuer}",
            actor=actor[:150],
        )
    return identity


class NoPasswordBackend(ModelBackend):
    """Django's ModelBackend with passwords turned off (LOCAL_LOGIN=0, console/settings.py):
    authenticate() checks no password anywhere (the login form, the token endpoint, the
    admin site), while sessions made through the provider still find their user."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        return None

    async def aauthenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> User | None:
        return None
