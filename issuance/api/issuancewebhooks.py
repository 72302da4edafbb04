"""/api/v1/issuance-webhooks/ (admin): URLs told when a certificate gets a new revision,
and /api/v1/issuance-webhook-deliveries/ (admin): each notice and its attempts.

The signing secret is write-only: sent when a webhook is created, stored encrypted, never
answered back. A test notice is queued (202) and sent by the worker, like real ones.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.common import ApiViewSet, ResourceViewSet, StrictSerializer
from issuance.api.errors import Conflict
from issuance.api.fields import NameField, StrictCharField
from issuance.api.patterns import HTTP_URL_MESSAGE, HTTP_URL_PATTERN, PatternField
from issuance.api.query import QueryFilter
from issuance.models import DeliveryEvent, IssuanceWebhook, WebhookDelivery, WebhookDeliveryState
from issuance.models.issuancewebhook import URL_MAX
from issuance.notifications import webhooks

CREATE_EXAMPLE = OpenApiExample(
    "Tell a deploy hook about every certificate of the internal CA",
    value={
        "name": "deploy",
        "url": "https://deploy.example.test/hooks/certificates",
        "secret": "change-me-to-a-long-random-secret",
        "issuerFilter": "internal-*",
    },
    request_only=True,
)


class StrictBooleanField(serializers.BooleanField):
    """true or false as JSON booleans (DRF's BooleanField also takes "yes", 1, "on")."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


def _glob_field() -> StrictCharField:
    return StrictCharField(
        required=False,
        allow_blank=True,
        max_length=webhooks.GLOB_MAX,
        help_text="A shell glob (fnmatch, case-sensitive); empty or absent matches every name.",
    )


class IssuanceWebhookWriteSerializer(StrictSerializer):
    name = NameField()
    url = PatternField(
        HTTP_URL_PATTERN,
        HTTP_URL_MESSAGE,
        max_length=URL_MAX,
        trim_whitespace=False,
        help_text="An http:// or https:// URL: a host name with a top-level domain (punycode "
        "for international names), localhost, or an IP address ([…] for IPv6); an optional "
        "port up to 65535 and user:password@; no whitespace.",
    )
    secret = StrictCharField(
        write_only=True,
        trim_whitespace=False,
        min_length=webhooks.SECRET_MIN,
        max_length=webhooks.SECRET_MAX,
        help_text="The HMAC-SHA256 signing secret; stored encrypted, never shown again.",
    )
    enabled = StrictBooleanField(required=False, default=True)
    issuerFilter = _glob_field()
    certificateFilter = _glob_field()


class IssuanceWebhookSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    url = serializers.CharField()
    enabled = serializers.BooleanField()
    issuerFilter = serializers.CharField(source="issuer_glob")
    certificateFilter = serializers.CharField(source="certificate_glob")
    createdAt = serializers.DateTimeField(source="created_at")
    createdBy = serializers.CharField(source="created_by")


class DeliveryAttemptSerializer(serializers.Serializer[Any]):
    at = serializers.CharField()
    status = serializers.IntegerField(allow_null=True, help_text="HTTP status; null: no answer")
    error = serializers.CharField(help_text="Empty on success.")
    ms = serializers.IntegerField(help_text="How long the attempt took.")


class WebhookDeliverySerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    webhook = serializers.CharField(source="webhook.name")
    event = serializers.ChoiceField(choices=DeliveryEvent.choices)
    certificate = serializers.CharField(source="certificate_name")
    revision = serializers.IntegerField(allow_null=True)
    state = serializers.ChoiceField(choices=WebhookDeliveryState.choices)
    attempts = DeliveryAttemptSerializer(many=True, source="typed_attempts")
    nextAttemptAt = serializers.SerializerMethodField()
    createdAt = serializers.DateTimeField(source="created_at")
    deliveredAt = serializers.DateTimeField(source="delivered_at", allow_null=True)

    def get_nextAttemptAt(self, obj: WebhookDelivery) -> str | None:
        if obj.state != WebhookDeliveryState.PENDING or obj.due_at is None:
            return None
        return obj.due_at.isoformat()


class IssuanceWebhookViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    ResourceViewSet,
):
    """Issuance webhooks (admin only): a signed JSON POST per new certificate revision."""

    serializer_class = IssuanceWebhookSerializer
    resource = "issuance-webhook"
    permission_actions = {"test": "send-test"}

    def get_queryset(self) -> Any:
        return IssuanceWebhook.objects.order_by("name")

    @extend_schema(
        request=IssuanceWebhookWriteSerializer,
        responses={201: IssuanceWebhookSerializer},
        examples=[CREATE_EXAMPLE],
    )
    def create(self, request: Request) -> Response:
        body = IssuanceWebhookWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        if IssuanceWebhook.objects.filter(name=data["name"]).exists():
            raise Conflict(f"Issuance webhook {data['name']!r} already exists.")
        try:
            hook = webhooks.create_webhook(
                data["name"],
                data["url"],
                data["secret"],
                actor=self.actor(),
                enabled=data["enabled"],
                issuer_glob=data.get("issuerFilter", ""),
                certificate_glob=data.get("certificateFilter", ""),
            )
        except webhooks.WebhookExists as exc:
            raise Conflict(str(exc)) from None
        except webhooks.WebhookError as exc:
            raise serializers.ValidationError({exc.field: [str(exc)]}) from None
        return Response(IssuanceWebhookSerializer(hook).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, name: str) -> Response:
        webhooks.delete_webhook(self.get_object(), actor=self.actor())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={202: WebhookDeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request: Request, name: str) -> Response:
        """Queue a test notice (event "test"); the worker sends it like a real one."""
        delivery = webhooks.queue_test(self.get_object(), actor=self.actor())
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class WebhookDeliveryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    """Notices of issuance webhooks, newest first, with every attempt (admin only).
    Filters: `webhook`, `certificate`, `state`."""

    serializer_class = WebhookDeliverySerializer
    resource = "webhook-delivery"
    filters = (
        QueryFilter("webhook", "webhook__name"),
        QueryFilter("certificate", "certificate_name"),
        QueryFilter("state", "state", choices=tuple(WebhookDeliveryState.values)),
    )

    def get_queryset(self) -> Any:
        return WebhookDelivery.objects.select_related("webhook").order_by("-created_at", "-id")
