"""/api/v1/scheduler/: the challenge scheduler's state (read only; count queries only)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Min
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from issuance.api.query import QueryParamsMixin
from issuance.models import Challenge

SchedulerStateSerializer = inline_serializer(
    "SchedulerState",
    {
        "processing": serializers.IntegerField(min_value=0, help_text="challenges being worked on"),
        "queued": serializers.IntegerField(min_value=0, help_text="challenges waiting for a slot"),
        "cap": serializers.IntegerField(min_value=0, help_text="MAX_CONCURRENT_CHALLENGES"),
        "free": serializers.IntegerField(min_value=0),
        "oldestQueuedAt": serializers.DateTimeField(allow_null=True),
        "processingTimeoutSeconds": serializers.IntegerField(min_value=0),
    },
)


class SchedulerView(QueryParamsMixin, APIView):
    resource = "dashboard"  # the permission table's row (issuance.access.permissions)

    @extend_schema(responses=SchedulerStateSerializer)
    def get(self, request: Request) -> Response:
        processing = Challenge.objects.filter(processing=True).count()
        queued = Challenge.objects.filter(finished=False, processing=False)
        queued_count = queued.count()
        oldest: Any = queued.aggregate(oldest=Min("created_at"))["oldest"] if queued_count else None
        cap = int(settings.MAX_CONCURRENT_CHALLENGES)
        return Response(
            {
                "processing": processing,
                "queued": queued_count,
                "cap": cap,
                "free": max(cap - processing, 0),
                "oldestQueuedAt": oldest.isoformat() if oldest else None,
                "processingTimeoutSeconds": int(
                    settings.CHALLENGE_PROCESSING_TIMEOUT.total_seconds()
                ),
            }
        )
