"""The bootstrap API: a client submits CSRs and reads its own requests, nothing else.

POST /api/v1/bootstrap/certificaterequests/          submit (201)
GET  /api/v1/bootstrap/certificaterequests/          this token's requests
GET  /api/v1/bootstrap/certificaterequests/<name>/   one of them (404 for others')
"""

from __future__ import annotations

from typing import Any, ClassVar

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, Throttled
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from issuance.api.common import LimitedJSONParser, StrictSerializer
from issuance.api.fields import (
    BlankAsNullField,
    NameField,
    ObjectField,
    ObjectListField,
    StrictCharField,
    StrictIntegerField,
)
from issuance.api.query import QueryParamsMixin
from issuance.bootstrap.auth import BootstrapClient, BootstrapTokenAuthentication, IsBootstrapClient
from issuance.bootstrap.certificaterequests import MAX_PENDING_PER_TOKEN, TooManyPending, submit
from issuance.models import Approval, CertificateRequest, RequestState
from issuance.models.base import NAME_RE
from issuance.pki.signing import SUPPORTED_USAGES
from issuance.specs.certificate import ISSUER_GROUP, ISSUER_KINDS
from issuance.specs.certificaterequest import MIN_EXPIRATION_SECONDS
from issuance.timing.durations import MAX_SECONDS

# The newest requests a listing shows.
LIST_LIMIT = 100
# A real CSR (its key was thrown away), so the documented example can be submitted as is.
EXAMPLE_CSR = """-----BEGIN CERTIFICATE REQUEST-----
MIIBCDCBsAIBADAdMRswGQYDVQQDDBJzeXN0ZW06bm9kZTpub2RlLTEwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAARbE+ISkF2sOS306dI8nHUM4Vlkw4bElFfjOSQ5
kim+sWpQQOomAJ4mGgEz3OMLVuj+r/TvgvyL3vYd414ztFnXoDEwLwYJKoZIhvcN
AQkOMSIwIDAeBgNVHREEFzAVghNub2RlLTEuZXhhbXBsZS50ZXN0MAoGCCqGSM49
BAMCA0cAMEQCIAG5L7X/5FpRyETmgIIIMOyWKcDvc8gKF1p93rsejyrzAiBcK4Dq
mVTypjSacgX9v2RK8lob8uX82VQZ5VgQ7bBhSw==
-----END CERTIFICATE REQUEST-----
"""
SUBMIT_EXAMPLE = OpenApiExample(
    "A node's serving certificate",
    value={
        "request": EXAMPLE_CSR,
        "issuerRef": {"name": "node-ca"},
        "expirationSeconds": 86400,
        "usages": ["digital signature", "server auth"],
    },
    request_only=True,
)
NAME_EXAMPLE = OpenApiParameter(
    "name",
    str,
    OpenApiParameter.PATH,
    examples=[OpenApiExample("A node's request", value="node-1-serving")],
)


class BootstrapTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    """The bootstrap API's security scheme in the OpenAPI schema."""

    target_class = BootstrapTokenAuthentication
    name = "bootstrapToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "<6 char id>.<16 char secret>",
            "description": "A bootstrap token (manage.py bootstrap_token create).",
        }


class BootstrapIssuerRefSerializer(StrictSerializer):
    name = NameField()
    kind = serializers.ChoiceField(choices=ISSUER_KINDS, required=False)
    group = serializers.ChoiceField(choices=[ISSUER_GROUP], required=False)


class BootstrapSubmitSerializer(StrictSerializer):
    """The body of a submission: its shape (issuance.bootstrap.certificaterequests checks the rest)."""

    name = NameField(required=False, allow_null=True, help_text="Generated when not given.")
    request = StrictCharField(help_text="The CSR, PEM (or base64 of the PEM).")
    issuerRef = BootstrapIssuerRefSerializer(required=False)
    signerName = StrictCharField(
        required=False,
        allow_null=True,
        help_text="Instead of issuerRef: mapped to an issuer by KUBE_SIGNER_NAMES.",
    )
    expirationSeconds = StrictIntegerField(
        required=False, allow_null=True, min_value=MIN_EXPIRATION_SECONDS, max_value=MAX_SECONDS
    )
    usages = serializers.ListField(
        child=serializers.ChoiceField(choices=sorted(SUPPORTED_USAGES)), required=False
    )


# signerName stands for issuerRef: exactly one of them (a null signerName is left out).
SIGNER_GIVEN = {"required": ["signerName"], "properties": {"signerName": {"type": "string"}}}
ISSUER_CHOICE = {
    "oneOf": [
        {"required": ["issuerRef"], "not": SIGNER_GIVEN},
        {**SIGNER_GIVEN, "not": {"required": ["issuerRef"]}},
    ]
}
SUBMIT_DESCRIPTION = (
    "Submit a CSR (it waits for approval; at most "
    f"{MAX_PENDING_PER_TOKEN} of a token's requests wait at once, 429 beyond). Give "
    "`issuerRef` or `signerName`, not both. Checked beyond the schema, each a 400 naming "
    "the field: `request` must be a CSR that parses and whose signature verifies; "
    "`issuerRef.name` must name an existing issuer this token may submit to, `signerName` "
    "one that KUBE_SIGNER_NAMES maps to an issuer; `name` must not be taken."
)


class BootstrapSubmitSchema(OpenApiSerializerExtension):  # type: ignore[no-untyped-call]
    """The submission's schema: its fields, and the choice between issuerRef and signerName."""

    target_class = BootstrapSubmitSerializer

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(
            self.target, direction, bypass_extensions=True
        )
        return {**schema, **ISSUER_CHOICE}


class BootstrapStatusSerializer(serializers.Serializer[Any]):
    approval = serializers.ChoiceField(choices=Approval.choices)
    state = serializers.ChoiceField(choices=RequestState.choices)
    decidedBy = serializers.CharField(source="decided_by")
    decidedAt = serializers.DateTimeField(source="decided_at", allow_null=True)
    conditions = ObjectListField()
    certificate = BlankAsNullField(source="certificate_pem", help_text="PEM chain once signed.")
    ca = BlankAsNullField(source="ca_pem", help_text="PEM of the issuing CA once signed.")
    failureTime = serializers.DateTimeField(source="failure_time", allow_null=True)


class BootstrapCertificateRequestSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    createdAt = serializers.DateTimeField(source="created_at")
    spec = ObjectField()
    status = BootstrapStatusSerializer(source="*")


class _BootstrapView(QueryParamsMixin, APIView):
    authentication_classes = [BootstrapTokenAuthentication]
    permission_classes = [IsBootstrapClient]
    parser_classes = [LimitedJSONParser]

    def own(self, request: Request) -> Any:
        client: BootstrapClient = request.user  # type: ignore[assignment]
        return CertificateRequest.objects.select_related("issuer").filter(
            source="bootstrap", requester=client.username
        )


class BootstrapRequestList(_BootstrapView):
    # At most MAX_PENDING_PER_TOKEN requests of a token wait for approval at once.
    extra_error_statuses: ClassVar[dict[str, tuple[int, ...]]] = {"POST": (429,)}

    @extend_schema(
        responses=inline_serializer(
            "BootstrapCertificateRequestList",
            {"items": BootstrapCertificateRequestSerializer(many=True)},
        ),
        description=f"This token's requests, newest first (at most {LIST_LIMIT}).",
        operation_id="v1_bootstrap_certificaterequests_list",
    )
    def get(self, request: Request) -> Response:
        items = self.own(request).order_by("-created_at", "-id")[:LIST_LIMIT]
        return Response({"items": BootstrapCertificateRequestSerializer(items, many=True).data})

    @extend_schema(
        request=BootstrapSubmitSerializer,
        responses={201: BootstrapCertificateRequestSerializer},
        examples=[SUBMIT_EXAMPLE],
        description=SUBMIT_DESCRIPTION,
    )
    def post(self, request: Request) -> Response:
        client: BootstrapClient = request.user  # type: ignore[assignment]
        BootstrapSubmitSerializer(data=request.data).is_valid(raise_exception=True)
        try:
            cr = submit(client.token, request.data)
        except TooManyPending as exc:
            raise Throttled(detail=str(exc)) from None
        return Response(
            BootstrapCertificateRequestSerializer(cr).data, status=status.HTTP_201_CREATED
        )


class BootstrapRequestDetail(_BootstrapView):
    @extend_schema(responses=BootstrapCertificateRequestSerializer, parameters=[NAME_EXAMPLE])
    def get(self, request: Request, name: str) -> Response:
        # Same answer for "not yours" and "does not exist": names are not disclosed.
        missing = NotFound(f"no CertificateRequest {name!r} submitted with this token")
        if not NAME_RE.fullmatch(name):
            raise missing
        cr = self.own(request).filter(name=name).first()
        if cr is None:
            raise missing
        return Response(BootstrapCertificateRequestSerializer(cr).data)
