"""/api/v1/certificaterequests/: CSRs (immutable), created from PEM, approved or denied."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.common import (
    ActionBodySerializer,
    CertificateRequestWriteSerializer,
    ResourceViewSet,
    merge_patch,
    read_write_body,
)
from issuance.api.errors import Conflict
from issuance.api.fields import ObjectField, ObjectListField, SpecField
from issuance.api.query import QueryFilter
from issuance.models import Approval, CertificateRequest, ImmutableSpecError, RequestState
from issuance.observability import events
from issuance.operations import actions
from issuance.specs import create_certificate_request
from issuance.specs.outcome import changed_fields


class CertificateRequestStatusSerializer(serializers.Serializer[Any]):
    """cert-manager's CertificateRequestStatus; `certificate` and `ca` are PEM text here
    (cert-manager's YAML carries them base64-encoded)."""

    state = serializers.ChoiceField(choices=RequestState.choices)
    approval = serializers.ChoiceField(choices=Approval.choices)
    decidedBy = serializers.CharField(source="decided_by")
    decidedAt = serializers.DateTimeField(source="decided_at", allow_null=True)
    conditions = ObjectListField()
    certificate = serializers.CharField(source="certificate_pem")
    ca = serializers.CharField(source="ca_pem")
    failureTime = serializers.DateTimeField(source="failure_time", allow_null=True)
    lastError = serializers.CharField(source="last_error")
    policyChecks = ObjectField(source="policy_checks")  # issuance.approval's verdict


class OwnerSerializer(serializers.Serializer[Any]):
    certificate = serializers.CharField(source="certificate.name")
    revision = serializers.IntegerField(allow_null=True)


class CertificateRequestSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    requester = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # the field, not Field.source
    owner = serializers.SerializerMethodField()
    spec = SpecField("StoredCertificateRequestSpec")
    status = CertificateRequestStatusSerializer(source="*")

    @extend_schema_field(OwnerSerializer(allow_null=True))
    def get_owner(self, obj: CertificateRequest) -> dict[str, Any] | None:
        if obj.certificate_id is None:
            return None
        return dict(OwnerSerializer(obj).data)


class CertificateRequestViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """CertificateRequests. Filters: `certificate`, `approval`, `state`, `issuer`."""

    queryset = CertificateRequest.objects.all()
    serializer_class = CertificateRequestSerializer
    resource = "certificate-request"

    filters = (
        QueryFilter("certificate", "certificate__name", "owning Certificate name"),
        QueryFilter("approval", "approval", choices=tuple(Approval.values)),
        QueryFilter("state", "state", choices=tuple(RequestState.values)),
        QueryFilter("issuer", "issuer__name", "issuer name"),
    )

    def get_queryset(self) -> Any:
        return CertificateRequest.objects.select_related("certificate").order_by(
            "-created_at", "-id"
        )

    @extend_schema(
        request=CertificateRequestWriteSerializer,
        responses={201: CertificateRequestSerializer},
        description="Submit a PEM CSR; the requester is the authenticated user. Name "
        "optional. 400 also when the body is well formed but names an issuer that does not "
        "exist (spec.issuerRef) or its request is not a CSR that parses.",
    )
    def create(self, request: Request) -> Response:
        body = read_write_body(request, CertificateRequestWriteSerializer)
        if body.get("name") and CertificateRequest.objects.filter(name=body["name"]).exists():
            raise Conflict(f"CertificateRequest {body['name']!r} already exists.")
        cr = create_certificate_request(
            body.get("name"), body["spec"], requester=self.actor(), source="api"
        )
        return Response(CertificateRequestSerializer(cr).data, status=status.HTTP_201_CREATED)

    def _immutable(self, request: Request, partial: bool) -> Response:
        current = self.get_object()
        serializer = CertificateRequestWriteSerializer(data=request.data, partial=partial)
        if not serializer.is_valid() and set(serializer.errors) != {"metadata.name"}:
            raise serializers.ValidationError(serializer.errors)
        # A well-formed body changes nothing, whatever name it gives (a name and a
        # metadata.name that differ included): the CertificateRequest is immutable (409).
        fields = ["spec"]
        if not serializer.errors:
            patch = serializer.validated_data["spec"]
            spec = merge_patch(current.spec, patch) if partial else patch
            fields = changed_fields(current.spec, spec) or ["spec"]
        raise ImmutableSpecError("CertificateRequest", current.name, fields)

    @extend_schema(request=CertificateRequestWriteSerializer, responses={409: None})
    def update(self, request: Request, name: str) -> Response:
        """Always 409: a CertificateRequest's spec is immutable; create a new one."""
        return self._immutable(request, partial=False)

    @extend_schema(request=CertificateRequestWriteSerializer, responses={409: None})
    def partial_update(self, request: Request, name: str) -> Response:
        """Always 409: a CertificateRequest's spec is immutable; create a new one."""
        return self._immutable(request, partial=True)

    def destroy(self, request: Request, name: str) -> Response:
        cr = self.get_object()
        owner = cr.certificate.name if cr.certificate_id and cr.certificate else ""
        with transaction.atomic():
            cr.delete()
            events.record(
                "CertificateRequest",
                name,
                "Deleted",
                "CertificateRequest deleted",
                actor=self.actor(),
                certificate_name=owner,
            )
        return Response(status=status.HTTP_204_NO_CONTENT)

    def _decide(self, request: Request, approve: bool) -> Response:
        body = ActionBodySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        cr = self.get_object()
        decide = actions.approve if approve else actions.deny
        default_reason = "Approved" if approve else "Denied"
        cr = decide(
            cr,
            actor=self.actor(),
            reason=body.validated_data.get("reason") or default_reason,
            message=body.validated_data.get("message") or "",
        )
        cr.refresh_from_db()
        return Response(CertificateRequestSerializer(cr).data)

    @extend_schema(request=ActionBodySerializer, responses=CertificateRequestSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, name: str) -> Response:
        """Approve (final). 409 if it was already approved or denied."""
        return self._decide(request, approve=True)

    @extend_schema(request=ActionBodySerializer, responses=CertificateRequestSerializer)
    @action(detail=True, methods=["post"])
    def deny(self, request: Request, name: str) -> Response:
        """Deny (final; counts as a failed issuance for an owning Certificate)."""
        return self._decide(request, approve=False)
