"""/api/v1/downloadtokens/: scoped download tokens (operators): list, create (the token is
in the answer once), revoke. The token text is never listed, logged or recorded."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.access.apitokens import NAME_MAX, TokenError
from issuance.api.common import ApiViewSet, StrictSerializer
from issuance.api.fields import StrictCharField
from issuance.api.query import QueryFilter
from issuance.delivery.downloadtokens import PASSWORD_MAX, PATTERN_MAX, create_download_token
from issuance.delivery.downloadtokens import revoke_download_token as revoke_token
from issuance.models import Certificate, DownloadToken


class DownloadTokenSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="The token's first characters, to tell it apart.")
    certificate = serializers.CharField(
        source="certificate.name", allow_null=True, default=None, help_text="Its one certificate."
    )
    namePattern = serializers.CharField(
        source="name_pattern", help_text="Or: certificates whose name matches this glob."
    )
    hasKeystorePassword = serializers.SerializerMethodField()
    createdBy = serializers.CharField(source="created_by")
    createdAt = serializers.DateTimeField(source="created_at")
    lastUsedAt = serializers.DateTimeField(source="last_used_at", allow_null=True)
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)

    def get_hasKeystorePassword(self, obj: DownloadToken) -> bool:
        return bool(obj.keystore_password_ciphertext)


class DownloadTokenCreatedSerializer(DownloadTokenSerializer):
    token = serializers.CharField(help_text="Shown once: only its SHA-256 digest is stored.")


class DownloadTokenCreateSerializer(StrictSerializer):
    name = StrictCharField(
        max_length=NAME_MAX,
        trim_whitespace=False,
        validators=[RegexValidator(r"^[^\x00-\x1f\x7f\s][^\x00-\x1f\x7f]*$")],
        help_text="What or who uses it (no control characters).",
    )
    certificate = StrictCharField(
        max_length=PATTERN_MAX,
        trim_whitespace=False,
        validators=[RegexValidator(r"^[-a-z0-9.*?\[\]]+$")],
        help_text="A certificate's name, or a glob on names (with *, ? or [...], e.g. web-*): "
        "the token reads that certificate, or every certificate whose name matches.",
    )
    keystorePassword = StrictCharField(
        required=False,
        allow_blank=True,
        max_length=PASSWORD_MAX,
        trim_whitespace=False,
        help_text="PKCS#12/JKS password for this token (else the spec's passwordSecretRef).",
    )


class DownloadTokenViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    """Scoped download tokens, newest first. Filter: `certificate`."""

    queryset = DownloadToken.objects.all()
    serializer_class = DownloadTokenSerializer
    resource = "download-token"
    filters = (QueryFilter("certificate", "certificate__name", "certificate name"),)

    def get_queryset(self) -> Any:
        return (
            DownloadToken.objects.select_related("certificate")
            .defer("digest", "certificate__spec")
            .order_by("-created_at", "-id")
        )

    @extend_schema(
        request=DownloadTokenCreateSerializer,
        responses={201: DownloadTokenCreatedSerializer},
        description="Create a download token (operator); the token is in this answer only. "
        "`certificate` without *, ? or [ names a certificate, which must exist: otherwise a "
        "400 naming `certificate` (the schema cannot say which exist).",
    )
    def create(self, request: Request) -> Response:
        body = DownloadTokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        target: str = data["certificate"]
        if "\n" in target:  # `$` in the validator's regex lets one trailing newline through
            raise serializers.ValidationError({"certificate": ["must be one line"]})
        cert, pattern = None, ""
        if any(c in target for c in "*?["):
            pattern = target
        else:
            cert = Certificate.objects.filter(name=target).first()
            if cert is None:
                raise serializers.ValidationError({"certificate": ["unknown certificate"]})
        try:
            with transaction.atomic():
                token, text = create_download_token(
                    data["name"],
                    actor=str(request.user.get_username()),
                    certificate=cert,
                    name_pattern=pattern,
                    keystore_password=data.get("keystorePassword", ""),
                )
        except TokenError as exc:
            raise serializers.ValidationError({"non_field_errors": [str(exc)]}) from None
        answer = dict(DownloadTokenSerializer(token).data, token=text)
        return Response(answer, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=DownloadTokenSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str) -> Response:
        """Revoke: the token stops working at once (401). Revoking twice changes nothing."""
        token = self.get_object()
        revoke_token(token.pk, actor=str(request.user.get_username()))
        return Response(DownloadTokenSerializer(self.get_queryset().get(pk=token.pk)).data)
