"""/api/v1/orders/: ACME Orders (read only; created by the CertificateRequest controller)."""

from __future__ import annotations

from typing import Any

from rest_framework import mixins, serializers

from issuance.api.common import ResourceViewSet
from issuance.api.fields import ObjectListField, SpecField
from issuance.api.query import QueryFilter
from issuance.models import Order, OrderState


class OrderRestartSerializer(serializers.Serializer[Any]):
    """An ACME order given up because the CA failed it after an outage of the CA; the
    Order then started a new ACME order, without failure backoff."""

    url = serializers.CharField()
    state = serializers.ChoiceField(choices=OrderState.choices)
    reason = serializers.CharField()
    failedAt = serializers.DateTimeField()
    outage = serializers.CharField()


class OrderStatusSerializer(serializers.Serializer[Any]):
    """cert-manager's OrderStatus; `certificate` is the PEM chain the CA returned."""

    url = serializers.CharField()
    finalizeURL = serializers.CharField(source="finalize_url")
    certificateURL = serializers.CharField(source="certificate_url")
    state = serializers.ChoiceField(choices=OrderState.choices)
    reason = serializers.CharField()
    authorizations = ObjectListField()
    certificate = serializers.CharField(source="certificate_pem")
    failureTime = serializers.DateTimeField(source="failure_time", allow_null=True)
    lastError = serializers.CharField(source="last_error")
    restarts = OrderRestartSerializer(many=True)


class OrderSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    request = serializers.CharField(source="request.name")
    certificate = serializers.SerializerMethodField()
    spec = SpecField("OrderSpec")
    status = OrderStatusSerializer(source="*")

    def get_certificate(self, obj: Order) -> str | None:
        """The Certificate the order is for (None for external CSRs)."""
        cert = obj.request.certificate if obj.request.certificate_id else None
        return cert.name if cert else None


class OrderViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """Orders. Filters: `request`, `certificate`, `state`."""

    queryset = Order.objects.all()
    serializer_class = OrderSerializer
    resource = "order"

    filters = (
        QueryFilter("request", "request__name", "CertificateRequest name"),
        QueryFilter("certificate", "request__certificate__name", "Certificate name"),
        QueryFilter("state", "state", choices=tuple(s for s in OrderState.values if s)),
    )

    def get_queryset(self) -> Any:
        return Order.objects.select_related("request", "request__certificate").order_by(
            "-created_at", "-id"
        )
