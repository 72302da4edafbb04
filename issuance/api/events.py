"""/api/v1/events/: the timeline (read only)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.common import LimitedJSONParser, filter_exact
from issuance.models import Event


class EventSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    name = serializers.CharField()
    certificate = serializers.CharField(source="certificate_name")
    type = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    actor = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")


class EventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Any]):
    """Events, newest first. Filters: `kind`, `name`, `certificate` (the whole tree of a
    Certificate: its requests, orders and challenges), `type`, `reason`, `actor`."""

    queryset = Event.objects.all()
    serializer_class = EventSerializer
    parser_classes = [LimitedJSONParser]

    def get_queryset(self) -> Any:
        qs = Event.objects.order_by("-created_at", "-id")
        qs = filter_exact(
            self.request,
            qs,
            (
                ("kind", "kind"),
                ("name", "name"),
                ("certificate", "certificate_name"),
                ("type", "type"),
                ("reason", "reason"),
                ("actor", "actor"),
            ),
        )
        return qs

    @extend_schema(
        parameters=[
            OpenApiParameter(p, str)
            for p in ("kind", "name", "certificate", "type", "reason", "actor")
        ]
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)
