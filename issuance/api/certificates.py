"""/api/v1/certificates/: Certificates, force-renew, revoke, and the key pair (admin only)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiExample,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.acme import health
from issuance.acme.fallback import issued_by_many, with_issued_by
from issuance.api.common import (
    CertificateWriteSerializer,
    ResourceViewSet,
    StrictSerializer,
    merge_patch,
    read_write_body,
    warn_ignored,
)
from issuance.api.errors import Conflict
from issuance.api.fields import CertificateMetadataOutField, ObjectListField, SpecField
from issuance.api.query import QueryFilter
from issuance.fastpaths.prebuilt_fields import PrebuiltFieldsMixin
from issuance.models import (
    REASONS,
    Certificate,
    CertificateState,
    Endpoint,
    Revocation,
    RevocationState,
    Secret,
)
from issuance.observability import events
from issuance.operations import actions
from issuance.probing.deployment import (
    FILTER_VALUES,
    Deployment,
    certificate_q,
    deployment,
    state_of,
    state_of_filter_value,
)
from issuance.shapes import CaUnreachable
from issuance.specs import apply_certificate_ex
from issuance.specs.certificate import CertificateExists

CREATE_EXAMPLE = OpenApiExample(
    "A certificate for one DNS name",
    value={
        "name": "web",
        "spec": {
            "dnsNames": ["web.example.com"],
            "issuerRef": {"name": "selfsigned", "kind": "Issuer"},
            "secretName": "web-tls",
        },
    },
    request_only=True,
)


def endpoint_rows(cert: Certificate) -> list[Endpoint]:
    """The certificate's endpoints, read once per object: from the list's prefetch, or one
    query kept on the object for the status's two fields."""
    rows: list[Endpoint] | None = getattr(cert, "_endpoint_rows", None)
    if rows is None:
        rows = list(cert.endpoints.all())
        cert._endpoint_rows = rows  # type: ignore[attr-defined]
    return rows


def without_endpoints(cert: Certificate) -> Certificate:
    """A certificate created just now has no endpoints: its answer reads none."""
    cert._endpoint_rows = []  # type: ignore[attr-defined]
    return cert


class CertificateStatusSerializer(PrebuiltFieldsMixin, serializers.Serializer[Any]):
    """cert-manager's CertificateStatus (camelCase), plus `state` and the last forced renewal."""

    state = serializers.ChoiceField(choices=CertificateState.choices)
    conditions = ObjectListField()
    observedGeneration = serializers.IntegerField(source="observed_generation")
    notBefore = serializers.DateTimeField(source="not_before", allow_null=True)
    notAfter = serializers.DateTimeField(source="not_after", allow_null=True)
    renewalTime = serializers.DateTimeField(source="renewal_time", allow_null=True)
    revision = serializers.IntegerField(allow_null=True)
    lastFailureTime = serializers.DateTimeField(source="last_failure_time", allow_null=True)
    failedIssuanceAttempts = serializers.IntegerField(
        source="failed_issuance_attempts", allow_null=True
    )
    nextRetryTime = serializers.DateTimeField(source="next_retry_time", allow_null=True)
    renewalInfo = serializers.SerializerMethodField()
    renewRequestedAt = serializers.DateTimeField(source="renew_requested_at", allow_null=True)
    renewRequestedBy = serializers.CharField(source="renew_requested_by")
    lastError = serializers.CharField(source="last_error")
    caUnreachable = serializers.SerializerMethodField()
    issuedBy = serializers.SerializerMethodField()
    deployment = serializers.SerializerMethodField()
    endpoints = serializers.SerializerMethodField()

    @extend_schema_field(
        inline_serializer(
            "CertificateRenewalInfo",
            {
                "windowStart": serializers.DateTimeField(allow_null=True),
                "windowEnd": serializers.DateTimeField(allow_null=True),
                "selectedTime": serializers.DateTimeField(allow_null=True),
                "lastChecked": serializers.DateTimeField(allow_null=True),
                "nextCheck": serializers.DateTimeField(allow_null=True),
            },
            allow_null=True,
        )
    )
    def get_renewalInfo(self, obj: Certificate) -> dict[str, Any] | None:
        """ARI (RFC 9773): the CA's suggested window for the current certificate, the time
        chosen in it, when it was last read and when it is read next (null: never polled)."""
        if obj.ari_checked_at is None and obj.ari_next_check is None:
            return None
        field = serializers.DateTimeField()

        def when(value: datetime | None) -> str | None:
            return field.to_representation(value) if value is not None else None

        return {
            "windowStart": when(obj.ari_window_start),
            "windowEnd": when(obj.ari_window_end),
            "selectedTime": when(obj.ari_renewal_time),
            "lastChecked": when(obj.ari_checked_at),
            "nextCheck": when(obj.ari_next_check),
        }

    @extend_schema_field(
        inline_serializer(
            "CertificateCAUnreachable",
            {
                "server": serializers.CharField(),
                "since": serializers.DateTimeField(),
                "error": serializers.CharField(),
                "reason": serializers.CharField(),
            },
            allow_null=True,
        )
    )
    def get_caUnreachable(self, obj: Certificate) -> CaUnreachable | None:
        """The issuer's ACME server does not answer: issuance waits for it (null otherwise)."""
        outage = health.outage_of_issuer(obj.issuer_id)
        if outage is None:
            return None
        return {
            "server": outage.directory_url,
            "since": serializers.DateTimeField().to_representation(outage.since),
            "error": outage.error,
            "reason": outage.reason,
        }

    @extend_schema_field(
        inline_serializer(
            "CertificateIssuedBy",
            {
                "server": serializers.CharField(),
                "fallback": serializers.IntegerField(),
                "order": serializers.CharField(),
            },
            allow_null=True,
        )
    )
    def get_issuedBy(self, obj: Certificate) -> dict[str, Any] | None:
        """The ACME server that issued the newest certificate (`fallback`: 0 for the
        issuer's first server, n for spec.acme.fallback[n-1]); null if not from ACME."""
        # Fields here are shared by every request (PrebuiltFieldsMixin): no context. Lists
        # and details read the annotation of the queryset (with_issued_by); an object
        # from elsewhere (a create or update answer) costs one query once issued.
        if hasattr(obj, "issued_order"):
            if not obj.issued_order:
                return None
            return {
                "server": getattr(obj, "issued_server", ""),
                "fallback": getattr(obj, "issued_index", 0),
                "order": obj.issued_order,
            }
        if obj.revision is None:
            return None
        return issued_by_many([obj.pk]).get(obj.pk)

    @extend_schema_field(
        inline_serializer(
            "CertificateDeployment",
            {
                "state": serializers.ChoiceField(
                    choices=[
                        "Deployed",
                        "Deploying",
                        "Stale",
                        "Mismatch",
                        "Unreachable",
                        "Unchecked",
                    ]
                ),
                "endpoints": serializers.IntegerField(),
                "current": serializers.IntegerField(),
                "stale": serializers.ListField(child=serializers.CharField()),
            },
            allow_null=True,
        )
    )
    def get_deployment(self, obj: Certificate) -> Deployment | None:
        """Whether the endpoints serve the current revision (docs/verifying-deployments.md);
        null when the certificate has no endpoints."""
        return deployment(endpoint_rows(obj), timezone.now())

    @extend_schema_field(
        inline_serializer(
            "CertificateEndpointStatus",
            {
                "address": serializers.CharField(),
                "protocol": serializers.CharField(),
                "state": serializers.CharField(),
                "probedAt": serializers.DateTimeField(allow_null=True),
                "revision": serializers.IntegerField(allow_null=True),
                "error": serializers.CharField(),
                "chainVerified": serializers.BooleanField(allow_null=True),
                "hostnameMatch": serializers.BooleanField(allow_null=True),
            },
            many=True,
        )
    )
    def get_endpoints(self, obj: Certificate) -> list[dict[str, Any]]:
        """The latest probe of each endpoint, in brief (the whole record, with the served
        chain: /api/v1/certificates/{name}/endpoints/)."""
        now = timezone.now()
        field = serializers.DateTimeField()
        out = []
        for e in endpoint_rows(obj):
            probe = e.typed_last_probe
            out.append(
                {
                    "address": e.address,
                    "protocol": e.protocol,
                    "state": state_of(e, now),
                    "probedAt": field.to_representation(e.probed_at) if e.probed_at else None,
                    "revision": e.served_revision,
                    "error": probe["error"] if probe else "",
                    "chainVerified": probe["chainVerified"] if probe else None,
                    "hostnameMatch": probe["hostnameMatch"] if probe else None,
                }
            )
        return out


class CertificateSerializer(PrebuiltFieldsMixin, serializers.Serializer[Any]):
    name = serializers.CharField()
    # As a cert-manager manifest has it, so that an answer sent back keeps its labels.
    metadata = CertificateMetadataOutField()
    generation = serializers.IntegerField()
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    spec = SpecField("CertificateSpec")
    status = CertificateStatusSerializer(source="*")


class RevokeBodySerializer(StrictSerializer):
    """Body of revoke: the RFC 5280 reason."""

    reason = serializers.ChoiceField(
        choices=list(REASONS),
        help_text="RFC 5280 CRLReason name. keyCompromise: the ACME request is signed with "
        "the certificate's own key.",
        error_messages={"invalid_choice": f"must be one of {', '.join(REASONS)}"},
    )


class RevocationSerializer(serializers.Serializer[Any]):
    """A revocation: Pending until the ACME CA confirmed it (the worker sends it), Revoked,
    or Failed with the CA's answer in `message`. A CA issuer's is Revoked at once."""

    certificate = serializers.CharField(source="certificate_name")
    issuer = serializers.CharField(source="issuer.name")
    serial = serializers.CharField(help_text="lower-case hex")
    reason = serializers.ChoiceField(choices=list(REASONS))
    state = serializers.ChoiceField(choices=RevocationState.choices)
    message = serializers.CharField()
    requestedBy = serializers.CharField(source="requested_by")
    requestedAt = serializers.DateTimeField(source="requested_at")
    revokedAt = serializers.DateTimeField(source="revoked_at", allow_null=True)


# Why a schema-valid body may still be answered 400 (schemathesis allows it for these).
NAMES_OTHERS = (
    "400 also when the body is well formed but names an issuer that does not exist "
    "(spec.issuerRef), when the merged spec breaks a rule JSON Schema cannot state (a "
    "DNS name twice, renewBefore not below duration, a cron expression that matches no "
    "date, a metadata.labels key that is no Kubernetes label key), or when its name is not "
    "the URL's."
)

SecretSerializer = inline_serializer(
    "CertificateSecret",
    {
        "name": serializers.CharField(),
        "tls.crt": serializers.CharField(),
        "tls.key": serializers.CharField(),
        "ca.crt": serializers.CharField(),
    },
)


def _labels(body: dict[str, Any]) -> Any:
    """The labels of a POST or PUT body (metadata.labels), which replace the stored ones:
    absent or null, none. Checked by apply_certificate_ex (a 400 naming each bad one)."""
    labels = (body.get("metadata") or {}).get("labels")
    return {} if labels is None else labels


def _deployed_q(value: str) -> Q:
    return certificate_q(state_of_filter_value(value), timezone.now())


class CertificateViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, ResourceViewSet):
    """Certificates. Filters: `search` (name, commonName, DNS names), `state`, `issuer`."""

    queryset = Certificate.objects.all()
    serializer_class = CertificateSerializer
    resource = "certificate"
    permission_actions = {"secret": "read-key"}

    filters = (
        QueryFilter(
            "search",
            "search_text__contains",
            "substring of name, commonName, DNS name",
            lowercase=True,
        ),
        QueryFilter("state", "state", choices=tuple(CertificateState.values)),
        QueryFilter("issuer", "issuer__name", "issuer name"),
        QueryFilter(
            "deployed",
            "",
            "what the endpoints serve: the certificates whose status.deployment.state is "
            "Stale, Mismatch, Unreachable, Deploying, Unchecked or Deployed (lower-cased), "
            "or none for those with no endpoints (docs/verifying-deployments.md)",
            choices=FILTER_VALUES,
            to_q=_deployed_q,
        ),
    )

    def get_queryset(self) -> Any:
        return with_issued_by(Certificate.objects.order_by("name")).prefetch_related("endpoints")

    @extend_schema(
        request=CertificateWriteSerializer,
        responses={201: CertificateSerializer},
        examples=[CREATE_EXAMPLE],
        description="Create a Certificate. " + NAMES_OTHERS,
    )
    def create(self, request: Request) -> Response:
        body = read_write_body(request, CertificateWriteSerializer)
        if not body.get("name"):
            return Response({"name": ["is required"]}, status=status.HTTP_400_BAD_REQUEST)
        try:
            applied = apply_certificate_ex(
                body["name"],
                body["spec"],
                actor=self.actor(),
                create_only=True,
                labels=_labels(body),
            )
        except CertificateExists:
            raise Conflict(
                f"Certificate {body['name']!r} already exists; use PUT or PATCH to change it."
            ) from None
        return warn_ignored(
            request,
            Response(
                CertificateSerializer(without_endpoints(applied.obj)).data,
                status=status.HTTP_201_CREATED,
            ),
        )

    @extend_schema(
        request=CertificateWriteSerializer,
        responses=CertificateSerializer,
        description="Replace the spec and the labels (metadata.labels; absent: none). "
        + NAMES_OTHERS,
    )
    def update(self, request: Request, name: str) -> Response:
        current = self.get_object()
        body = read_write_body(request, CertificateWriteSerializer, url_name=current.name)
        cert = apply_certificate_ex(
            current.name, body["spec"], actor=self.actor(), labels=_labels(body)
        ).obj
        return warn_ignored(request, Response(CertificateSerializer(cert).data))

    @extend_schema(
        request=CertificateWriteSerializer,
        responses=CertificateSerializer,
        description="JSON merge patch (RFC 7386) of the spec and metadata.labels: `null` "
        "removes a field or a label. " + NAMES_OTHERS,
    )
    def partial_update(self, request: Request, name: str) -> Response:
        current = self.get_object()
        body = read_write_body(
            request, CertificateWriteSerializer, partial=True, url_name=current.name
        )
        spec = merge_patch(current.spec, body["spec"])
        metadata = body.get("metadata") or {}
        labels = None  # not in the patch: kept
        if "labels" in metadata:
            patch = metadata["labels"]
            labels = {} if patch is None else merge_patch(current.labels, patch)
        cert = apply_certificate_ex(current.name, spec, actor=self.actor(), labels=labels).obj
        return warn_ignored(request, Response(CertificateSerializer(cert).data))

    def destroy(self, request: Request, name: str) -> Response:
        cert = self.get_object()
        actions.delete_certificate(cert, actor=self.actor())  # the Secret is kept
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={202: CertificateSerializer})
    @action(detail=True, methods=["post"])
    def renew(self, request: Request, name: str) -> Response:
        """Issue now, bypassing the renewal time and any failure backoff (cmctl renew)."""
        cert = actions.force_renew(self.get_object(), actor=self.actor())
        cert.refresh_from_db()
        return Response(CertificateSerializer(cert).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=RevokeBodySerializer, responses={202: RevocationSerializer})
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, name: str) -> Response:
        """Revoke the issued certificate (RFC 5280 reason), then renew it with a new key.

        ACME issuers: the worker sends revokeCert to the CA (state Pending until it
        answers). CA issuers: recorded at once and listed in /crl/<issuer>.crl. 409 when
        nothing is issued yet, the certificate is self-signed, or it is already revoked.
        """
        body = RevokeBodySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        revocation = actions.revoke(
            self.get_object(), body.validated_data["reason"], actor=self.actor()
        )
        revocation = Revocation.objects.select_related("issuer").get(pk=revocation.pk)
        return Response(RevocationSerializer(revocation).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=SecretSerializer)
    @action(detail=True, methods=["get"])
    def secret(self, request: Request, name: str) -> Response:
        """The stored key pair (admin only); every read is recorded in the event timeline."""
        cert = self.get_object()
        secret = Secret.objects.filter(name=cert.secret_name).first()
        if secret is None or not secret.tls_crt:
            raise NotFound(f"Secret {cert.secret_name!r} does not exist yet (not issued).")
        events.record(
            "Certificate",
            cert.name,
            "SecretRead",
            f"Private key of secret {secret.name!r} read through the API",
            actor=self.actor(),
            certificate_name=cert.name,
        )
        return Response(
            {
                "name": secret.name,
                "tls.crt": secret.tls_crt,
                "tls.key": secret.tls_key,
                "ca.crt": secret.ca_crt,
            }
        )
