"""/api/v1/users/ (admin): the console's Users page as an API: list, create (with a one-time
password, in the answer once), PATCH roles, cluster scopes and active, and reset a user's
password or second factor. Through
issuance.access.users, as the page, so the rules hold either way: the system keeps an active admin,
an admin is never limited to clusters. An admin does not disable themselves or drop their own
admin role here (409; the page offers neither): a script would lock itself out mid-run.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.validators import RegexValidator
from django.db import transaction
from django.db.models import Exists, OuterRef, Prefetch
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.access import passwords, two_factor, users
from issuance.access.roles import ADMIN, ROLES, granted_roles
from issuance.api.common import ApiViewSet, StrictSerializer
from issuance.api.errors import Conflict
from issuance.api.fields import StrictCharField
from issuance.models import Cluster, PasswordChangeRequired, RoleScope, TOTPFactor

# Django's usernames are letters, digits and @.+-_; ASCII here, so that the schema's pattern
# (ECMAScript, where \w is ASCII) and the check agree.
USERNAME_RE = r"\A[A-Za-z0-9_.@+-]{1,150}\Z"
# CLUSTER or CLUSTER/NAMESPACE, both DNS labels (as on the page).
_LABEL = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
SCOPE_RE = rf"\A{_LABEL}(/{_LABEL})?\Z"


class StrictBooleanField(serializers.BooleanField):
    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


def scopes_field(help_text: str, **kwargs: Any) -> serializers.ListField:
    """A list of `cluster` or `cluster/namespace` entries (a user's scope, a group rule's)."""
    return serializers.ListField(
        child=StrictCharField(
            trim_whitespace=False,
            max_length=127,
            validators=[RegexValidator(SCOPE_RE, "CLUSTER or CLUSTER/NAMESPACE")],
        ),
        required=False,
        max_length=1000,
        help_text=help_text,
        **kwargs,
    )


def _roles_field() -> serializers.ListField:
    return serializers.ListField(
        child=serializers.ChoiceField(choices=list(ROLES)),
        required=False,
        max_length=len(ROLES),
        help_text="The user's roles (none: signs in, sees nothing).",
    )


class UserSerializer(serializers.Serializer[Any]):
    username = serializers.CharField()
    roles = serializers.SerializerMethodField()
    scopes = serializers.SerializerMethodField()
    active = serializers.BooleanField(source="is_active")
    superuser = serializers.BooleanField(source="is_superuser")
    dateJoined = serializers.DateTimeField(source="date_joined")
    lastLogin = serializers.DateTimeField(source="last_login", allow_null=True)
    secondFactor = serializers.SerializerMethodField(
        help_text='The user\'s second factor: "totp" (an authenticator app), or null (none '
        "set up). Read-only: the user sets it up in the console; reset-second-factor removes it."
    )
    mustChangePassword = serializers.BooleanField(
        source="must_change_password",
        read_only=True,
        help_text="An admin created the user or reset their password: they choose their own "
        "at their next sign-in (console) before anything else. Read-only.",
    )

    @extend_schema_field(serializers.ChoiceField(choices=["totp"], allow_null=True))
    def get_secondFactor(self, user: User) -> str | None:
        # Annotated by UserViewSet.get_queryset (no query per user).
        return "totp" if getattr(user, "has_totp_factor", False) else None

    def get_roles(self, user: User) -> list[str]:
        names = {g.name for g in user.groups.all()}
        return sorted(names | ({ADMIN} if user.is_superuser else set()))

    def get_scopes(self, user: User) -> list[str]:
        """CLUSTER or CLUSTER/NAMESPACE; empty: the roles apply everywhere."""
        return [
            f"{s.cluster.name}/{s.namespace}" if s.namespace else s.cluster.name
            for s in user.role_scopes.all()
        ]


class UserCreatedSerializer(UserSerializer):
    password = serializers.CharField(help_text="The one-time password, shown once.")


class UserCreateSerializer(StrictSerializer):
    username = StrictCharField(
        trim_whitespace=False,
        max_length=150,
        validators=[RegexValidator(USERNAME_RE, "letters, digits and @.+-_ only")],
    )
    roles = _roles_field()


class UserUpdateSerializer(StrictSerializer):
    roles = _roles_field()
    scopes = scopes_field(
        "Limit the roles to these clusters (CLUSTER) or namespaces "
        "(CLUSTER/NAMESPACE); [] removes the limit. Each cluster must exist (400 naming the "
        "entry otherwise). An admin cannot be limited (409).",
    )
    active = StrictBooleanField(
        required=False,
        help_text="false: the user's sessions and API tokens stop working at once.",
    )


class UserViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    """Console users (admin only)."""

    serializer_class = UserSerializer
    lookup_field = "username"
    lookup_value_regex = r"[^/]+"
    http_method_names = ["get", "post", "patch", "head", "options"]
    resource = "user"

    def get_queryset(self) -> Any:
        return (
            User.objects.order_by("username")
            .prefetch_related(
                Prefetch("groups", queryset=Group.objects.only("id", "name")),
                Prefetch("role_scopes", queryset=RoleScope.objects.select_related("cluster")),
            )
            .annotate(
                # In the list's one query, whatever the page size.
                has_totp_factor=Exists(
                    TOTPFactor.objects.filter(user_id=OuterRef("pk"), confirmed=True)
                ),
                must_change_password=Exists(
                    PasswordChangeRequired.objects.filter(user_id=OuterRef("pk"))
                ),
            )
        )

    def get_object(self) -> Any:
        if not re.fullmatch(USERNAME_RE, self.kwargs["username"]):
            # Cannot exist (and PostgreSQL text cannot hold some characters, e.g. NUL).
            raise NotFound("No User matches the given query.")
        return super().get_object()

    def _answer(self, user: User, code: int = status.HTTP_200_OK) -> Response:
        return Response(UserSerializer(self.get_queryset().get(pk=user.pk)).data, status=code)

    @extend_schema(request=UserCreateSerializer, responses={201: UserCreatedSerializer})
    def create(self, request: Request) -> Response:
        body = UserCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        username = body.validated_data["username"]
        if User.objects.filter(username__iexact=username).exists():
            raise Conflict(f"A user named {username!r} exists.")
        try:
            user, password = users.create_user(
                username, body.validated_data.get("roles", []), actor=request.user.get_username()
            )
        except users.UserError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from None
        data = dict(UserSerializer(self.get_queryset().get(pk=user.pk)).data)
        data["password"] = password
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(request=UserUpdateSerializer, responses=UserSerializer)
    def partial_update(self, request: Request, username: str) -> Response:
        user = self.get_object()
        body = UserUpdateSerializer(data=request.data, partial=True)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        scopes = self._scopes(data["scopes"]) if "scopes" in data else None
        actor = request.user.get_username()
        if user.pk == request.user.pk and (
            data.get("active") is False
            or ("roles" in data and ADMIN not in data["roles"] and ADMIN in granted_roles(user))
        ):
            raise Conflict("You cannot disable yourself or drop your own admin role here.")
        try:
            # One change: a refused part leaves the others unapplied too.
            with transaction.atomic():
                # Unscoping before a new admin role, scoping after a removed one.
                if scopes == []:
                    users.set_scopes(user.pk, [], actor=actor)
                if "roles" in data:
                    users.set_roles(user.pk, data["roles"], actor=actor)
                if scopes:
                    users.set_scopes(user.pk, scopes, actor=actor)
                if "active" in data:
                    users.set_active(user.pk, data["active"], actor=actor)
        except users.UserError as exc:
            # The input is well formed; the users' state refuses it (the last admin, a scoped
            # admin).
            raise Conflict(f"{exc.field}: {exc}") from None
        return self._answer(user)

    @extend_schema(request=None, responses={200: UserCreatedSerializer})
    @action(detail=True, methods=["post"], url_path="reset-password")
    def reset_password(self, request: Request, username: str) -> Response:
        """A new generated one-time password, in this answer only; the user must change it
        at their next sign-in (console), and their sessions end. Not your own (409): change
        it in the console."""
        user = self.get_object()
        if user.pk == request.user.pk:
            raise Conflict("Change your own password in the console.")
        user, password = passwords.reset(user.pk, actor=request.user.get_username())
        data = dict(UserSerializer(self.get_queryset().get(pk=user.pk)).data)
        data["password"] = password
        return Response(data)

    @extend_schema(request=None, responses={200: UserSerializer})
    @action(detail=True, methods=["post"], url_path="reset-second-factor")
    def reset_second_factor(self, request: Request, username: str) -> Response:
        """Removes the user's second factor and recovery codes (a lost phone); they set one
        up at their next sign-in if REQUIRE_2FA asks them to. Audited."""
        user = self.get_object()
        two_factor.reset(user.pk, actor=request.user.get_username())
        return self._answer(user)

    @staticmethod
    def _scopes(entries: list[str]) -> list[tuple[str, str]]:
        pairs = [tuple(e.split("/", 1)) if "/" in e else (e, "") for e in entries]
        known = set(
            Cluster.objects.filter(name__in={c for c, _ in pairs}).values_list("name", flat=True)
        )
        errors = {
            f"scopes[{i}]": [f"there is no cluster named {c!r}"]
            for i, (c, _) in enumerate(pairs)
            if c not in known
        }
        if errors:
            raise serializers.ValidationError(errors)
        return list(dict.fromkeys((c, ns) for c, ns in pairs))
