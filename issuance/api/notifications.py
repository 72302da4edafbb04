"""/api/v1/notification-channels/: where notifications go. The URL and the webhook secret are
write-only: responses show the scheme and a masked host (`target`), never the URL.

/api/v1/notification-rules/: what is sent where. Rules are a top-level collection, each
naming its channel in a `channel` field (filter with `?channel=`), as Kubernetes objects
refer to each other by name (a Certificate's issuerRef) rather than nest: a rule's name is
unique on its own, and moving a rule to another channel is a change of one field, not of its
address. Both go through issuance.notifications (channels, rules), as the Notifications page
does: the same checks, the same timeline entries.
"""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.common import ResourceViewSet, StrictSerializer
from issuance.api.errors import Conflict
from issuance.api.fields import NameField, StrictCharField, StrictIntegerField
from issuance.api.query import QueryFilter
from issuance.models import NotificationChannel, NotificationRule
from issuance.notifications import channel_store, channel_urls, rules

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


def _url_field(required: bool) -> StrictCharField:
    return StrictCharField(
        required=required,
        write_only=True,
        trim_whitespace=False,  # the pattern allows no spaces: " json://h" is refused, not cut
        max_length=channel_urls.URL_MAX,
        validators=[
            RegexValidator(
                channel_urls.URL_RE,
                "Not an apprise URL: expected scheme://… with one of apprise's schemes "
                "(lowercase) and no spaces.",
            )
        ],
        help_text=channel_urls.URL_HELP,
    )


class ChannelUpdateSerializer(StrictSerializer):
    url = _url_field(required=False)
    secret = StrictCharField(
        required=False,
        write_only=True,
        trim_whitespace=False,  # a key is used as sent
        min_length=channel_store.MIN_SECRET,
        max_length=channel_store.MAX_SECRET,
        validators=[RegexValidator(channel_store.SECRET_RE, "No control characters.")],
        help_text="The HMAC-SHA256 key that signs a webhook+https:// channel's messages "
        f"({channel_store.MIN_SECRET} to {channel_store.MAX_SECRET} characters, no control characters); "
        "required with a webhook+ URL, unused by the others. Write-only.",
    )
    enabled = StrictBooleanField(
        required=False, help_text="false: nothing is sent (messages are not queued either)."
    )
    rateLimitPerHour = StrictIntegerField(
        required=False,
        min_value=1,
        max_value=channel_store.MAX_RATE_LIMIT,
        help_text="Messages an hour; more are deferred to the next hour (default "
        f"{channel_store.DEFAULT_RATE_LIMIT}).",
    )
    digestHourUtc = StrictIntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=23,
        help_text="An hour of the day (UTC): one summary a day then instead of each message; "
        "null: each message on its own.",
    )


class ChannelCreateSerializer(ChannelUpdateSerializer):
    name = NameField()
    url = _url_field(required=True)


def _input(body: dict[str, Any]) -> channel_store.ChannelInput:
    return channel_store.ChannelInput(
        url=body.get("url"),
        secret=body.get("secret"),
        enabled=body.get("enabled"),
        rate_limit_per_hour=body.get("rateLimitPerHour"),
        digest_hour=body.get("digestHourUtc"),
        digest_hour_set="digestHourUtc" in body,
    )


_FIELD_NAMES = {"rate_limit_per_hour": "rateLimitPerHour", "digest_hour": "digestHourUtc"}


def _errors(exc: channel_store.ChannelError) -> Response:
    body = {_FIELD_NAMES.get(k, k): [v] for k, v in exc.errors.items()}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


class NotificationChannelViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """Notification channels (admin changes them; every role reads the masked list)."""

    queryset = NotificationChannel.objects.order_by("name")
    serializer_class = ChannelSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    resource = "notification-channel"

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
            channel = channel_store.save(None, body["name"], _input(body), self.actor())
        except channel_store.ChannelError as exc:
            return _errors(exc)
        return Response(ChannelSerializer(channel).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=ChannelUpdateSerializer, responses=ChannelSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        channel = self.get_object()
        serializer = ChannelUpdateSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        body = dict(serializer.validated_data)
        try:
            channel = channel_store.save(channel, channel.name, _input(body), self.actor())
        except channel_store.ChannelError as exc:
            return _errors(exc)
        return Response(ChannelSerializer(channel).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, name: str) -> Response:
        channel_store.delete(self.get_object(), self.actor())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={202: ChannelSerializer})
    @action(detail=True, methods=["post"], url_path="test")
    def send_test(self, request: Request, name: str) -> Response:
        """Queue a test message; the worker sends it (see the Notifications page)."""
        channel = self.get_object()
        channel_store.send_test(channel, self.actor())
        return Response(ChannelSerializer(channel).data, status=status.HTTP_202_ACCEPTED)


RULE_EXAMPLE = OpenApiExample(
    "Mail ops about web certificates expiring within 10 days",
    value={
        "name": "web-expiring",
        "channel": "ops-mail",
        "condition": "expiring",
        "threshold": 10,
        "namePattern": "web-*",
    },
    request_only=True,
)
CONDITION_HELP = "What is reported: " + "; ".join(
    f"{value} ({label})" for value, label in rules.CONDITION_CHOICES
)
CHANNEL_HELP = (
    "The name of the notification channel the messages go to. It must exist: a name that is "
    "well formed but names no channel is a 400 on `channel`."
)


def _pattern_field(source: str) -> StrictCharField:
    return StrictCharField(
        source=source,
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=rules.PATTERN_MAX,
        validators=[rules.PATTERN_VALIDATOR],
        help_text=rules.PATTERN_HELP,
    )


class RuleFieldsSerializer(StrictSerializer):
    """A rule's settable fields, each under the model field it sets (`source`), which is what
    issuance.notifications.rules takes. A new setting of the model is one line here: the
    answers (RuleSerializer), PUT/PATCH/POST, `apply -f` manifests and the schema follow."""

    channel = NameField(help_text=CHANNEL_HELP)
    condition = serializers.ChoiceField(
        choices=rules.CONDITIONS,
        help_text=CONDITION_HELP,
        error_messages={"invalid_choice": f"must be one of {', '.join(rules.CONDITIONS)}"},
    )
    threshold = StrictIntegerField(
        required=False, min_value=0, max_value=rules.MAX_THRESHOLD, help_text=rules.THRESHOLD_HELP
    )
    namePattern = _pattern_field("name_pattern")
    issuerPattern = _pattern_field("issuer_pattern")
    enabled = StrictBooleanField(
        required=False, help_text="false: the rule sends nothing (default true)."
    )
    notifyResolved = StrictBooleanField(
        source="notify_resolved",
        required=False,
        help_text="“cluster unreachable”: one more message when the cluster is reachable again; "
        "the endpoint conditions (endpoint_*): one more when the endpoint is well again or "
        "removed (default false); unused by the other conditions.",
    )


class RuleCreateSerializer(RuleFieldsSerializer):
    name = NameField(help_text="The rule's name (unique; a Kubernetes object name).")


class RuleSerializer(RuleFieldsSerializer):
    """A rule as answered: every field of the model."""

    name = serializers.CharField()
    channel = serializers.CharField(  # type: ignore[assignment]  # answered, not checked
        source="channel.name", help_text="The channel's name."
    )
    createdAt = serializers.DateTimeField(source="created_at", read_only=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Answers only: every field is always there (the schema marks them all required).
        for field in self.fields.values():
            field.read_only = True


def _rule_errors(exc: rules.RuleError) -> Response:
    body = {rules.api_name(k): [v] for k, v in exc.errors.items()}
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


def _changes(serializer: serializers.Serializer[Any]) -> dict[str, Any]:
    return {k: v for k, v in serializer.validated_data.items() if k != "name"}


class NotificationRuleViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """Notification rules: one condition sent to one channel (admin changes them, as on the
    Notifications page; every role reads them). PUT sets every field (the optional ones left
    out go back to their defaults), PATCH the ones given. Filters: `channel`, `condition`,
    `enabled`."""

    queryset = NotificationRule.objects.select_related("channel").order_by("name")
    serializer_class = RuleSerializer
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]
    resource = "notification-rule"
    filters = (
        QueryFilter("channel", "channel__name", "Only the rules of this channel."),
        QueryFilter("condition", "condition", choices=rules.CONDITIONS),
        QueryFilter("enabled", "enabled", boolean=True),
    )

    @extend_schema(
        request=RuleCreateSerializer, responses={201: RuleSerializer}, examples=[RULE_EXAMPLE]
    )
    def create(self, request: Request) -> Response:
        serializer = RuleCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        name = serializer.validated_data["name"]
        if NotificationRule.objects.filter(name=name).exists():
            raise Conflict(f"A rule named {name!r} already exists.")
        try:
            rule = rules.create(name, _changes(serializer), self.actor())
        except rules.RuleError as exc:
            return _rule_errors(exc)
        return Response(RuleSerializer(rule).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=RuleFieldsSerializer, responses=RuleSerializer)
    def update(self, request: Request, name: str) -> Response:
        rule = self.get_object()
        serializer = RuleFieldsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            saved = rules.replace(rule.name, _changes(serializer), self.actor())
        except rules.RuleError as exc:
            return _rule_errors(exc)
        return Response(RuleSerializer(saved.rule).data)

    @extend_schema(request=RuleFieldsSerializer, responses=RuleSerializer)
    def partial_update(self, request: Request, name: str) -> Response:
        rule = self.get_object()
        serializer = RuleFieldsSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        try:
            saved = rules.update(rule, _changes(serializer), self.actor())
        except rules.RuleError as exc:
            return _rule_errors(exc)
        return Response(RuleSerializer(saved.rule).data)

    @extend_schema(request=None, responses={204: None})
    def destroy(self, request: Request, name: str) -> Response:
        rules.delete(self.get_object(), self.actor())
        return Response(status=status.HTTP_204_NO_CONTENT)
