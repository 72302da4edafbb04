"""/api/v1/issuers/: Issuers and ClusterIssuers (one table; `kind` tells them apart)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.acme import health
from issuance.api.common import (
    IssuerWriteSerializer,
    ResourceViewSet,
    merge_patch,
    read_write_body,
    warn_ignored,
)
from issuance.api.errors import Conflict
from issuance.api.fields import ObjectListField, SpecField
from issuance.api.query import QueryFilter
from issuance.models import Issuer, IssuerKind
from issuance.observability import events
from issuance.shapes import AcmeServerStatus
from issuance.specs import apply_issuer_ex

CREATE_EXAMPLE = OpenApiExample(
    "A self-signed issuer",
    value={"name": "selfsigned", "kind": "Issuer", "spec": {"selfSigned": {}}},
    request_only=True,
)


# Why a schema-valid body may still be answered 400 (schemathesis allows it for these).
NAMES_OTHERS = (
    "400 also when the body is well formed but carries PEM that does not parse or match (a CA "
    "certificate and key, caBundle), uses a dns-lexicon option its provider does not have, "
    "or breaks a rule JSON Schema cannot state (a regular expression, CIDR or fallback "
    "server given twice, a selector.matchLabels key that is no Kubernetes label key), or "
    "when its name is not the URL's."
)


class IssuerAcmeStatusSerializer(serializers.Serializer[Any]):
    uri = serializers.CharField(source="acme_account_uri")
    lastRegisteredEmail = serializers.SerializerMethodField()

    def get_lastRegisteredEmail(self, obj: Issuer) -> str:
        if not obj.acme_account_uri:
            return ""
        return str((obj.typed_spec.get("acme") or {}).get("email") or "")


class IssuerCAStatusSerializer(serializers.Serializer[Any]):
    """Whether the ACME server answers (read from its AcmeServer record when asked)."""

    server = serializers.CharField()
    reachable = serializers.BooleanField()
    unreachableSince = serializers.DateTimeField(allow_null=True)
    lastError = serializers.CharField()
    failedRequests = serializers.IntegerField()
    nextProbeAt = serializers.DateTimeField(allow_null=True)


def ca_status(issuer: Issuer) -> AcmeServerStatus | None:
    if issuer.kind != "acme":
        return None
    server = str(issuer.acme_spec.get("server") or "")
    outage = health.outage_of_server(server)
    return {
        "server": server,
        "reachable": outage is None,
        "unreachableSince": outage.since if outage else None,
        "lastError": outage.error if outage else "",
        "failedRequests": outage.failed_requests if outage else 0,
        "nextProbeAt": outage.probe_at if outage else None,
    }


class IssuerStatusSerializer(serializers.Serializer[Any]):
    conditions = ObjectListField()
    observedGeneration = serializers.IntegerField(source="observed_generation")
    message = serializers.CharField(source="status_message")
    lastError = serializers.CharField(source="last_error")
    acme = serializers.SerializerMethodField()
    ca = serializers.SerializerMethodField()

    @extend_schema_field(IssuerAcmeStatusSerializer(allow_null=True))
    def get_acme(self, obj: Issuer) -> dict[str, Any] | None:
        if obj.kind != "acme":
            return None
        return dict(IssuerAcmeStatusSerializer(obj).data)

    @extend_schema_field(IssuerCAStatusSerializer(allow_null=True))
    def get_ca(self, obj: Issuer) -> dict[str, Any] | None:
        status_ = ca_status(obj)
        return None if status_ is None else dict(IssuerCAStatusSerializer(status_).data)


class IssuerSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    kind = serializers.SerializerMethodField()
    generation = serializers.IntegerField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    spec = SpecField("IssuerSpec")
    status = IssuerStatusSerializer(source="*")

    @extend_schema_field(serializers.ChoiceField(choices=["Issuer", "ClusterIssuer"]))
    def get_kind(self, obj: Issuer) -> str:
        return "ClusterIssuer" if obj.cluster_scoped else "Issuer"


class IssuerViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    ResourceViewSet,
):
    """Issuers. Inline secrets in a spec (CA key, EAB HMAC key, TSIG secret) are moved into
    stored Secrets; responses show only the references."""

    queryset = Issuer.objects.all()
    serializer_class = IssuerSerializer
    resource = "issuer"

    filters = (QueryFilter("kind", "kind", "issuer type", choices=tuple(IssuerKind.values)),)

    def get_queryset(self) -> Any:
        return Issuer.objects.order_by("name")

    def _apply(self, name: str, spec: Any, kind: str | None, current: Issuer | None) -> Issuer:
        cluster = (kind == "ClusterIssuer") if kind else bool(current and current.cluster_scoped)
        return apply_issuer_ex(name, spec, cluster=cluster, actor=self.actor()).obj

    @extend_schema(
        request=IssuerWriteSerializer,
        responses={201: IssuerSerializer},
        examples=[CREATE_EXAMPLE],
        description="Create an Issuer or ClusterIssuer. " + NAMES_OTHERS,
    )
    def create(self, request: Request) -> Response:
        body = read_write_body(request, IssuerWriteSerializer)
        if not body.get("name"):
            return Response({"name": ["is required"]}, status=status.HTTP_400_BAD_REQUEST)
        if Issuer.objects.filter(name=body["name"]).exists():
            raise Conflict(
                f"Issuer {body['name']!r} already exists; use PUT or PATCH to change it."
            )
        issuer = self._apply(body["name"], body["spec"], body.get("kind"), None)
        return warn_ignored(
            request, Response(IssuerSerializer(issuer).data, status=status.HTTP_201_CREATED)
        )

    @extend_schema(
        request=IssuerWriteSerializer,
        responses=IssuerSerializer,
        description="Replace the spec. " + NAMES_OTHERS,
    )
    def update(self, request: Request, name: str) -> Response:
        current = self.get_object()
        body = read_write_body(request, IssuerWriteSerializer, url_name=current.name)
        issuer = self._apply(current.name, body["spec"], body.get("kind"), current)
        return warn_ignored(request, Response(IssuerSerializer(issuer).data))

    @extend_schema(
        request=IssuerWriteSerializer,
        responses=IssuerSerializer,
        description="JSON merge patch (RFC 7386) of the spec: `null` removes a field. "
        + NAMES_OTHERS,
    )
    def partial_update(self, request: Request, name: str) -> Response:
        current = self.get_object()
        body = read_write_body(request, IssuerWriteSerializer, partial=True, url_name=current.name)
        spec = merge_patch(current.spec, body["spec"])
        issuer = self._apply(current.name, spec, body.get("kind"), current)
        return warn_ignored(request, Response(IssuerSerializer(issuer).data))

    def destroy(self, request: Request, name: str) -> Response:
        issuer = self.get_object()
        with transaction.atomic():
            issuer.delete()  # ProtectedError (→ 409) while certificates use it
            events.record("Issuer", name, "Deleted", "Issuer deleted", actor=self.actor())
        return Response(status=status.HTTP_204_NO_CONTENT)
