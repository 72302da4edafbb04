"""POST /api/v1/issuers/{name}/test-dns/: the issuers page's "Test DNS" (operator): the DNS-01
preflight for one example name, now, without an order; the outcome is answered and kept on
the issuer (condition DNSPreflight), as on the page."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.acme.solvers import preflight_step
from issuance.api.common import ApiViewSet, StrictSerializer
from issuance.api.errors import Conflict
from issuance.api.fields import StrictCharField
from issuance.models import Issuer
from issuance.models.base import NAME_RE
from issuance.specs.names import dns_name_problem

_LABEL = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
# A lowercase DNS name, optionally a wildcard; the top-level label starts with a letter (so
# never an IP address, and never all digits, which dns_name_problem refuses too).
DNS_NAME_RE = rf"\A(\*\.)?({_LABEL}\.)*[a-z]([-a-z0-9]{{0,61}}[a-z0-9])?\Z"


class DnsTestSerializer(StrictSerializer):
    dnsName = StrictCharField(
        max_length=253,
        trim_whitespace=False,
        validators=[
            RegexValidator(DNS_NAME_RE, "must be a lowercase DNS name, e.g. www.example.com")
        ],
        help_text="An example name the issuer's dns01 solver would answer for (lowercase; "
        "`*.example.com` for a wildcard).",
    )


class DnsTestResultSerializer(serializers.Serializer[Any]):
    ok = serializers.BooleanField()
    dnsName = serializers.CharField(source="dns_name")
    message = serializers.CharField()
    record = serializers.CharField(help_text="Where the TXT record goes (after CNAMEs).")
    zone = serializers.CharField()
    provider = serializers.CharField()
    seconds = serializers.FloatField(help_text="How long the preflight took.")


class IssuerDnsTestViewSet(ApiViewSet):
    """DNS-01 preflight of an issuer (the issuers page's "Test DNS")."""

    resource = "issuer"

    @extend_schema(
        request=DnsTestSerializer,
        responses={200: DnsTestResultSerializer},
        description="Preflight one example name now (the TXT record is written, checked and "
        "removed through the issuer's dns01 provider; no ACME order). 200 with `ok` false when "
        "the preflight fails; 409 when the issuer has no dns01 solver.",
    )
    def test_dns(self, request: Request, name: str) -> Response:
        if not NAME_RE.fullmatch(name):
            get_object_or_404(Issuer.objects.none())
        issuer = get_object_or_404(Issuer, name=name)
        body = DnsTestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        dns_name = body.validated_data["dnsName"]
        problem = dns_name_problem(dns_name, allow_wildcard=True)
        if problem:
            raise serializers.ValidationError({"dnsName": [problem]})
        if issuer.kind != "acme" or not preflight_step.uses_dns01(issuer):
            raise Conflict(f"Issuer {issuer.name} has no dns01 solver.")
        result = preflight_step.test_name(issuer, dns_name)
        return Response(DnsTestResultSerializer(result).data)
