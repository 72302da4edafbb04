"""/api/v1/events/: the timeline (read only)."""

from __future__ import annotations

from typing import Any

from rest_framework import mixins, serializers

from issuance.api.common import ApiViewSet
from issuance.api.query import QueryFilter
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


class EventViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ApiViewSet):
    """Events, newest first. Filters: `kind`, `name`, `certificate` (the whole tree of a
    Certificate: its requests, orders and challenges), `type`, `reason`, `actor`."""

    queryset = Event.objects.all()
    serializer_class = EventSerializer
    resource = "event"
    filters = tuple(
        QueryFilter(param, lookup)
        for param, lookup in (
            ("kind", "kind"),
            ("name", "name"),
            ("certificate", "certificate_name"),
            ("type", "type"),
            ("reason", "reason"),
            ("actor", "actor"),
        )
    )

    def get_queryset(self) -> Any:
        return Event.objects.order_by("-created_at", "-id")
