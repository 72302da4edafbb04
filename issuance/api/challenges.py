"""/api/v1/challenges/: ACME Challenges (read only; created by the Order controller)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.common import ResourceViewSet
from issuance.models import Challenge, ChallengeState


class ChallengeStatusSerializer(serializers.Serializer[Any]):
    processing = serializers.BooleanField()
    presented = serializers.BooleanField()
    presentedAt = serializers.DateTimeField(source="presented_at")
    scheduledAt = serializers.DateTimeField(source="scheduled_at")
    state = serializers.CharField()
    reason = serializers.CharField()
    nextCheckAt = serializers.DateTimeField(source="next_check_at")
    attempts = serializers.IntegerField()
    lastError = serializers.CharField(source="last_error")


class ChallengeSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    order = serializers.CharField(source="order.name")
    spec = serializers.JSONField()
    status = ChallengeStatusSerializer(source="*")


class ChallengeViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """Challenges. Filters: `order`, `dnsName`, `type`, `state`, `processing`."""

    queryset = Challenge.objects.all()
    serializer_class = ChallengeSerializer

    def get_queryset(self) -> Any:
        qs = Challenge.objects.select_related("order").order_by("created_at", "id")
        qs = self.filter_exact(
            qs,
            (
                ("order", "order__name"),
                ("dnsName", "dns_name"),
                ("type", "type"),
                ("state", "state"),
            ),
        )
        processing = self.query_param("processing").lower()
        if processing in {"true", "false"}:
            qs = qs.filter(processing=processing == "true")
        return qs

    @extend_schema(
        parameters=[
            OpenApiParameter("order", str, description="Order name"),
            OpenApiParameter("dnsName", str),
            OpenApiParameter("type", str, enum=["http-01", "dns-01"]),
            OpenApiParameter("state", str, enum=[s for s in ChallengeState.values if s]),
            OpenApiParameter("processing", bool),
        ]
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)
