"""/api/v1/challenges/: ACME Challenges (read only; created by the Order controller)."""

from __future__ import annotations

from typing import Any

from rest_framework import mixins, serializers

from issuance.api.common import ResourceViewSet
from issuance.api.fields import SpecField
from issuance.api.query import QueryFilter
from issuance.models import Challenge, ChallengeState, ChallengeType


class ChallengeStatusSerializer(serializers.Serializer[Any]):
    processing = serializers.BooleanField()
    presented = serializers.BooleanField()
    presentedAt = serializers.DateTimeField(source="presented_at", allow_null=True)
    scheduledAt = serializers.DateTimeField(source="scheduled_at", allow_null=True)
    state = serializers.ChoiceField(choices=ChallengeState.choices)
    reason = serializers.CharField()
    nextCheckAt = serializers.DateTimeField(source="next_check_at", allow_null=True)
    attempts = serializers.IntegerField()
    lastError = serializers.CharField(source="last_error")


class ChallengeSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    order = serializers.CharField(source="order.name")
    spec = SpecField("ChallengeSpec")
    status = ChallengeStatusSerializer(source="*")


class ChallengeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """Challenges. Filters: `order`, `dnsName`, `type`, `state`, `processing`."""

    queryset = Challenge.objects.all()
    serializer_class = ChallengeSerializer
    resource = "challenge"

    filters = (
        QueryFilter("order", "order__name", "Order name"),
        QueryFilter("dnsName", "dns_name"),
        QueryFilter("type", "type", choices=tuple(ChallengeType.values)),
        QueryFilter("state", "state", choices=tuple(s for s in ChallengeState.values if s)),
        QueryFilter("processing", "processing", boolean=True),
    )

    def get_queryset(self) -> Any:
        return Challenge.objects.select_related("order").order_by("created_at", "id")
