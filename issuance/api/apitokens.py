"""/api/v1/tokens/: the requesting user's own API tokens, as on the console's API tokens page
(/account/tokens/): list, create (the token is in the answer once), revoke. Any signed-in
user, with or without a role, manages their own tokens and sees no one else's (another
user's token id is a 404). The token text is never listed, logged or recorded.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.access import apitokens
from issuance.api.common import ApiViewSet, StrictSerializer
from issuance.api.errors import Conflict
from issuance.api.fields import StrictCharField
from issuance.models import ApiToken


class ApiTokenSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The token's first characters, to tell it apart.")
    createdAt = serializers.DateTimeField(source="created_at")
    lastUsedAt = serializers.DateTimeField(source="last_used_at", allow_null=True)
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    token = serializers.CharField(
        help_text="`Authorization: Token <token>`. Shown once: only its SHA-256 is stored."
    )


class ApiTokenCreateSerializer(StrictSerializer):
    name = StrictCharField(
        max_length=apitokens.NAME_MAX,
        trim_whitespace=False,
        # Starts with a visible character; no control characters (it is shown in lists).
        validators=[RegexValidator(r"\A[^\x00-\x20\x7f][^\x00-\x1f\x7f]*\Z")],
        help_text="What or who uses it, e.g. a script or a machine (no control characters).",
    )


class ApiTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    """Your own API tokens, newest first (revoked ones too, with `revokedAt`)."""

    serializer_class = ApiTokenSerializer
    resource = "api-token"
    # Signed in is enough, as on the console's page: a user with no role yet still manages
    # the tokens they sign in with.
    permission_classes = [IsAuthenticated]

    def get_queryset(self) -> Any:
        return ApiToken.objects.filter(user_id=int(self.request.user.pk or 0)).defer("digest")

    @extend_schema(request=ApiTokenCreateSerializer, responses={201: ApiTokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        body = ApiTokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        user = request.user
        try:
            token, text = apitokens.create_token(
                user,  # type: ignore[arg-type]  # authenticated: a User
                body.validated_data["name"],
                actor=user.get_username(),
            )
        except apitokens.TokenError as exc:
            raise serializers.ValidationError({"name": [str(exc)]}) from None
        data = dict(ApiTokenSerializer(token).data)
        data["token"] = text
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: ApiTokenSerializer})
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        """Revoke one of your tokens at once (again: no change). Not the token this request
        is made with (409): that would lock the caller out mid-script; use another token or
        the console."""
        token = self.get_object()
        if isinstance(request.auth, ApiToken) and request.auth.pk == token.pk:
            raise Conflict("This request is made with this token; revoke it with another one.")
        user = request.user
        revoked = apitokens.revoke_token(
            user,  # type: ignore[arg-type]
            token.pk,
            actor=user.get_username(),
        )
        return Response(ApiTokenSerializer(revoked).data)
