"""/api/v1/orders/: ACME Orders (read only; created by the CertificateRequest controller)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.common import ResourceViewSet
from issuance.models import Order, OrderState


class OrderRestartSerializer(serializers.Serializer[Any]):
    """An ACME order given up because the CA failed it after an outage of the CA; the
    Order then started a new ACME order, without failure backoff."""

    url = serializers.CharField()
    state = serializers.CharField()
    reason = serializers.CharField()
    failedAt = serializers.DateTimeField()
    outage = serializers.CharField()


class OrderStatusSerializer(serializers.Serializer[Any]):
    """cert-manager's OrderStatus; `certificate` is the PEM chain the CA returned."""

    url = serializers.CharField()
    finalizeURL = serializers.CharField(source="finalize_url")
    certificateURL = serializers.CharField(source="certificate_url")
    state = serializers.CharField()
    reason = serializers.CharField()
    authorizations = serializers.JSONField()
    certificate = serializers.CharField(source="certificate_pem")
    failureTime = serializers.DateTimeField(source="failure_time")
    lastError = serializers.CharField(source="last_error")
    restarts = OrderRestartSerializer(many=True)


class OrderSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    request = serializers.CharField(source="request.name")
    certificate = serializers.SerializerMethodField()
    spec = serializers.JSONField()
    status = OrderStatusSerializer(source="*")

    def get_certificate(self, obj: Order) -> str | None:
        """The Certificate the order is for (None for external CSRs)."""
        cert = obj.request.certificate if obj.request.certificate_id else None
        return cert.name if cert else None


class OrderViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """Orders. Filters: `request`, `certificate`, `state`."""

    queryset = Order.objects.all()
    serializer_class = OrderSerializer

    def get_queryset(self) -> Any:
        qs = Order.objects.select_related("request", "request__certificate").order_by(
            "-created_at", "-id"
        )
        qs = self.filter_exact(
            qs,
            (
                ("request", "request__name"),
                ("certificate", "request__certificate__name"),
                ("state", "state"),
            ),
        )
        return qs

    @extend_schema(
        parameters=[
            OpenApiParameter("request", str, description="CertificateRequest name"),
            OpenApiParameter("certificate", str, description="Certificate name"),
            OpenApiParameter("state", str, enum=list(OrderState.values)),
        ]
    )
    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().list(request, *args, **kwargs)
