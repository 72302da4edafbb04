"""/api/v1/certificates/{name}/endpoints/: the servers that should serve a Certificate and
what each served at its last probe; `check-endpoints/` is "Check now" (docs/verifying-
deployments.md). Operators add, remove and check; viewers read."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.drainage import set_override
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.common import ApiViewSet, StrictSerializer
from issuance.api.errors import Conflict
from issuance.api.fields import StrictCharField
from issuance.api.patterns import IPV4_PATTERN, IPV6_PATTERN
from issuance.api.spec_schemas import dns_name
from issuance.models import Certificate, Endpoint, EndpointProtocol
from issuance.models.base import NAME_RE
from issuance.probing import endpoints as operations
from issuance.specs.names import MAX_DNS_NAME


class EndpointProbeSerializer(serializers.Serializer[Any]):
    """What the last probe found (`Endpoint.last_probe`); null before the first probe."""

    probedAt = serializers.DateTimeField()
    durationMs = serializers.IntegerField()
    match = serializers.ChoiceField(
        choices=["current", "previous", "foreign", "error"],
        help_text="current: the current revision; previous: an older one (`behind` "
        "revisions behind); foreign: a certificate this Certificate never had; error: "
        "nothing read (`errorKind`, `error`).",
    )
    revision = serializers.IntegerField(allow_null=True)
    behind = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()
    errorKind = serializers.CharField(
        help_text="refused, timeout, unresolvable, starttls, handshake, network; empty "
        "when a certificate was read"
    )
    tlsVersion = serializers.CharField()
    fingerprintSha256 = serializers.CharField()
    serial = serializers.CharField()
    subject = serializers.CharField()
    issuer = serializers.CharField()
    notAfter = serializers.DateTimeField(allow_null=True)
    expired = serializers.BooleanField()
    chainVerified = serializers.BooleanField(
        help_text="the served chain leads to the issuer's CA (the system trust store for "
        "ACME issuers; the certificate itself for selfSigned)"
    )
    chainError = serializers.CharField()
    hostnameMatch = serializers.BooleanField(help_text="the leaf covers serverName (or the host)")
    chain = serializers.ListField(child=serializers.CharField(), help_text="PEM, leaf first")


class EndpointSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    host = serializers.CharField()
    port = serializers.IntegerField()
    serverName = serializers.CharField(source="name_checked")
    protocol = serializers.ChoiceField(choices=EndpointProtocol.choices)
    address = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    createdBy = serializers.CharField(source="created_by")
    nextProbeAt = serializers.DateTimeField(source="next_probe_at")
    servedSince = serializers.DateTimeField(source="served_since", allow_null=True)
    lastProbe = EndpointProbeSerializer(source="last_probe", allow_null=True)


def _no_outer_whitespace(value: str) -> None:
    if value != value.strip():
        raise serializers.ValidationError("must not start or end with whitespace")


class HostField(StrictCharField):
    """A DNS name (RFC 1123, no wildcard, not an all-digit top-level label) or an IP address
    (IPv6 with or without brackets); the schema states the same alternatives. The schema is
    set in __init__: DRF copies declared fields by calling __init__ again."""

    def __init__(self, *, blank: bool = False, **kwargs: Any) -> None:
        super().__init__(
            max_length=MAX_DNS_NAME, trim_whitespace=False, allow_blank=blank, **kwargs
        )
        self.validators.append(_no_outer_whitespace)
        choices: list[dict[str, Any]] = [dns_name(wildcard=False)]
        if blank:
            choices.append({"type": "string", "maxLength": 0})
        else:
            choices += [
                {"type": "string", "pattern": f"^{IPV4_PATTERN}$"},
                {"type": "string", "pattern": f"^\\[?({IPV6_PATTERN})\\]?$"},
            ]
        schema: dict[str, Any] = {"type": "string", "maxLength": MAX_DNS_NAME, "anyOf": choices}
        set_override(self, "field", schema)


class EndpointCreateSerializer(StrictSerializer):
    host = HostField(help_text="DNS name or IP address")
    port = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=65535,
        help_text="default: 443 (tls), 587 (smtp), 143 (imap), 110 (pop3)",
    )
    serverName = HostField(
        blank=True,
        required=False,
        help_text="the SNI name sent and checked against the certificate (default: the host)",
    )
    protocol = serializers.ChoiceField(
        choices=EndpointProtocol.values,
        required=False,
        help_text="tls, or STARTTLS over smtp, imap or pop3",
    )


def _certificate(name: str) -> Certificate:
    if not NAME_RE.fullmatch(name):
        get_object_or_404(Certificate.objects.none())
    return get_object_or_404(Certificate.objects.select_related("issuer"), name=name)


class EndpointViewSet(ApiViewSet):
    """Endpoints of one Certificate."""

    resource = "endpoint"
    serializer_class = EndpointSerializer
    # At most MAX_PER_CERTIFICATE rows: the list is one array, not pages.
    pagination_class = None

    def get_queryset(self) -> Any:
        return Endpoint.objects.all()

    @extend_schema(responses=EndpointSerializer(many=True))
    def list(self, request: Request, name: str) -> Response:
        cert = _certificate(name)
        rows = cert.endpoints.order_by("host", "port", "server_name")
        return Response(EndpointSerializer(rows, many=True).data)

    @extend_schema(
        request=EndpointCreateSerializer,
        responses={201: EndpointSerializer},
        description="Add a server that should serve this certificate; it is probed at the "
        "worker's next loop, then every PROBE_INTERVAL. 400 names the field that is wrong; "
        "409 when the certificate already has an endpoint at this address, or has "
        "MAX_PER_CERTIFICATE (100) endpoints.",
    )
    def create(self, request: Request, name: str) -> Response:
        cert = _certificate(name)
        body = EndpointCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        try:
            endpoint = operations.add(
                cert,
                operations.EndpointInput(
                    host=data["host"],
                    port=data.get("port"),
                    server_name=data.get("serverName", ""),
                    protocol=data.get("protocol", "tls"),
                ),
                actor=str(request.user.get_username()),
            )
        except operations.EndpointConflict as exc:
            raise Conflict(str(exc)) from None
        except operations.EndpointError as exc:
            raise serializers.ValidationError({k: [v] for k, v in exc.errors.items()}) from None
        return Response(EndpointSerializer(endpoint).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={204: None})
    def destroy(self, request: Request, name: str, pk: str) -> Response:
        cert = _certificate(name)
        endpoint = get_object_or_404(Endpoint, certificate=cert, pk=int(pk))
        operations.remove(endpoint, actor=str(request.user.get_username()))
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=None,
        responses={202: EndpointSerializer(many=True)},
        description="Check now: probe every endpoint of the certificate at the worker's next "
        "loop (within seconds); the answer lists them as they are before the probe. Read "
        "the list again for the results.",
    )
    def check(self, request: Request, name: str) -> Response:
        cert = _certificate(name)
        operations.check_now(cert, actor=str(request.user.get_username()))
        rows = cert.endpoints.order_by("host", "port", "server_name")
        return Response(EndpointSerializer(rows, many=True).data, status=status.HTTP_202_ACCEPTED)
