"""/api/v1/stats/: the dashboard charts' numbers (viewer; three grouped queries)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from issuance.api.query import QueryParamsMixin
from issuance.observability.stats import ISSUANCE_DAYS, RENEWAL_DAYS, Stats, stats


class IssuerCountSerializer(serializers.Serializer[Any]):
    issuer = serializers.CharField(help_text='an issuer\'s name, or "other issuers"')
    count = serializers.IntegerField(min_value=0)


class RenewalDaySerializer(serializers.Serializer[Any]):
    date = serializers.DateField()
    total = serializers.IntegerField(min_value=0)
    byIssuer = IssuerCountSerializer(many=True, help_text="only issuers with renewals that day")


class RenewalsSerializer(serializers.Serializer[Any]):
    start = serializers.DateField(help_text="the first day (today)")
    days = serializers.IntegerField(help_text=f"number of days ({RENEWAL_DAYS})")
    issuers = serializers.ListField(
        child=serializers.CharField(), help_text="the series, busiest first"
    )
    overdue = serializers.IntegerField(min_value=0, help_text="renewal time before today")
    perDay = RenewalDaySerializer(many=True)


class ExpiryBucketSerializer(serializers.Serializer[Any]):
    bucket = serializers.ChoiceField(
        choices=["expired", "lt7", "d7to30", "d30to60", "d60to90", "gt90"]
    )
    name = serializers.CharField(help_text="how the console labels it")
    count = serializers.IntegerField(min_value=0)


class ExpirySerializer(serializers.Serializer[Any]):
    buckets = ExpiryBucketSerializer(many=True)
    withoutCertificate = serializers.IntegerField(
        min_value=0, help_text="certificates not issued yet"
    )


class IssuanceDaySerializer(serializers.Serializer[Any]):
    date = serializers.DateField()
    issued = serializers.IntegerField(min_value=0)
    failed = serializers.IntegerField(min_value=0, help_text="Failed or Denied")


class StatsSerializer(serializers.Serializer[Any]):
    generatedAt = serializers.DateTimeField()
    renewals = RenewalsSerializer()
    expiry = ExpirySerializer()
    issuance = IssuanceDaySerializer(
        many=True, help_text=f"the last {ISSUANCE_DAYS} days, oldest first"
    )


def stats_document(data: Stats) -> dict[str, Any]:
    renewals = data.renewals
    return {
        "generatedAt": data.generated_at,
        "renewals": {
            "start": renewals.start,
            "days": len(renewals.days),
            "issuers": list(renewals.series),
            "overdue": renewals.overdue,
            "perDay": [
                {
                    "date": d.day,
                    "total": d.total,
                    "byIssuer": [
                        {"issuer": name, "count": n}
                        for name, n in zip(renewals.series, d.counts, strict=True)
                        if n
                    ],
                }
                for d in renewals.days
            ],
        },
        "expiry": {
            "buckets": [{"bucket": b.key, "name": b.label, "count": b.count} for b in data.expiry],
            "withoutCertificate": data.without_certificate,
        },
        "issuance": [
            {"date": d.day, "issued": d.issued, "failed": d.failed} for d in data.issuance
        ],
    }


class StatsView(QueryParamsMixin, APIView):
    """Renewals per day for 90 days by issuer, certificates by days to expiry, issuance
    outcomes per day for 14 days, as JSON.

    The same numbers drawn as charts are on the console's [dashboard](/#dash-charts)."""

    resource = "dashboard"  # the permission table's row (issuance.access.permissions)

    # The schema's own description: the docstring's link is for the browsable API page (the
    # generated API reference would take it as a broken link).
    @extend_schema(
        responses=StatsSerializer,
        description="Renewals per day for 90 days by issuer, certificates by days to expiry, "
        "issuance outcomes per day for 14 days, as JSON: the numbers of the dashboard's charts.",
    )
    def get(self, request: Request) -> Response:
        return Response(StatsSerializer(stats_document(stats())).data)
