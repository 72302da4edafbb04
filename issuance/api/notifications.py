"""/api/v1/notification-channels/: where notifications go. The URL and the webhook secret are
write-only: responses show the scheme and a masked host (`target`), never the URL."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.common import ResourceViewSet, StrictSerializer
from issuance.api.errors import Conflict
from issuance.api.fields import NameField, StrictCharField, StrictIntegerField
from issuance.api.permissions import ADMIN
from issuance.models import NotificationChannel
from issuance.notifications import channels

EXAMPLE = OpenApiExample(
    "E-mail through an SMTP server",
    value={
        "name": "ops-mail",
        "url": "mailtos://user:password@smtp.example.com?to=ops@example.com",
        "rateLimitPerHour": 20,
    },
    request_only=True,
)


class ChannelSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    target = serializers.CharField(
        source="url_hint", help_text="The URL's scheme and a masked host; the URL is not shown."
    )
    signed = serializers.SerializerMethodField(help_text="A signed JSON webhook (webhook+…).")
    enabled = serializers.BooleanField()
    rateLimitPerHour = serializers.IntegerField(source="rate_limit_per_hour")
    digestHourUtc = serializers.IntegerField(source="digest_hour", allow_null=True)
    createdAt = serializers.DateTimeField(source="created_at")

    def get_signed(self, obj: NotificationChannel) -> bool:
        return obj.url_hint.startswith("webhook+")


class StrictBooleanField(serializers.BooleanField):
    """true or false as JSON booleans (DRF's BooleanField also takes 0, "yes", …)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


URL_HELP = (
    "An apprise URL (mailto://, slack://, msteams://, json://, …) or webhook+https://… for a "
    "signed JSON webhook; checked with apprise (400 on the url field if it refuses it)."
)


class ChannelUpdateSerializer(StrictSerializer):
    url = StrictCharField(required=False, write_only=True, max_length=4096, help_text=URL_HELP)
    secret = StrictCharField(
        required=False,
        write_only=True,
        max_length=256,
        help_text="The HMAC key of a signed webhook (at least 16 characters).",
    )
    enabled = StrictBooleanField(required=False)
    rateLimitPerHour = StrictIntegerField(required=False, min_value=1, max_value=10000)
    digestHourUtc = StrictIntegerField(required=False, allow_null=True, min_value=0, max_value=23)


class ChannelCreateSerializer(ChannelUpdateSerializer):
    name = NameField()
    url = StrictCharField(write_only=True, max_length=4096, help_text=URL_HELP)


def _input(body: dict[str, Any]) -> channels.ChannelInput:
    return channels.ChannelInput(
        url=body.get("url"),
        secret=body.get("secret"),
        enabled=body.get("enabled"),
        rate_limit_per_hour=body.get("rateLimitPerHour"),
        digest_hour=body.get("digestHourUtc"),
        digest_hour_set="digestHourUtc" in body,
    )


_FIELD_NAMES = {"rate_limit_per_hour": "rateLimitPerHour", "digest_hour": "digestHourUtc"}


def _errors(exc: channels.ChannelError) -> Response:
    body = {_FIELD_NAMES.get(k, k): [v] for k, v in exc.errors.items()}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


class NotificationChannelViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """Notification channels (admin changes them; every role reads the masked list)."""

    queryset = NotificationChannel.objects.order_by("name")
    serializer_class = ChannelSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    required_roles = {
        "create": ADMIN,
        "partial_update": ADMIN,
        "destroy": ADMIN,
        "send_test": ADMIN,
    }

    @extend_schema(
        request=ChannelCreateSerializer,
        responses={201: ChannelSerializer},
        examples=[EXAMPLE],
    )
    def create(self, request: Request) -> Response:
        serializer = ChannelCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        body = dict(serializer.validated_data)
        if NotificationChannel.objects.filter(name=body["name"]).exists():
            raise Conflict(f"A channel named {body['name']!r} already exists.")
        try:
            channel = channels.save(None, body["name"], _input(body), self.actor())
        except channels.ChannelError as exc:
            return _errors(exc)
        return Response(ChannelSerializer(channel).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ChannelUpdateSerializer, responses=ChannelSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        channel = self.get_object()
        serializer = ChannelUpdateSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        body = dict(serializer.validated_data)
        try:
            channel = channels.save(channel, channel.name, _input(body), self.actor())
        except channels.ChannelError as exc:
            return _errors(exc)
        return Response(ChannelSerializer(channel).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, name: str) -> Response:
        channels.delete(self.get_object(), self.actor())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={202: ChannelSerializer})
    @action(detail=True, methods=["post"], url_path="test")
    def send_test(self, request: Request, name: str) -> Response:
        """Queue a test message; the worker sends it (see the Notifications page)."""
        channel = self.get_object()
        channels.send_test(channel, self.actor())
        return Response(ChannelSerializer(channel).data, status=status.HTTP_202_ACCEPTED)
