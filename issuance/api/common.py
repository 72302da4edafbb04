"""Shared API parts: the size-limited JSON parser, the write serializers, viewset bases."""

from __future__ import annotations

import copy
import io
from collections.abc import Mapping
from typing import Any, ClassVar

from django.conf import settings
from rest_framework import serializers, viewsets
from rest_framework.exceptions import NotFound
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from issuance.api.errors import PayloadTooLarge
from issuance.api.fields import (
    LabelledMetadataField,
    MetadataField,
    NameField,
    SpecField,
    StrictCharField,
)
from issuance.api.query import QueryFilterBackend, QueryParamsMixin
from issuance.models.base import NAME_RE
from issuance.specs.kubernetes_metadata import ignored_fields

API_VERSION = "cert-manager.io/v1"


class LimitedJSONParser(JSONParser):
    """JSON bodies up to DATA_UPLOAD_MAX_MEMORY_SIZE; bigger ones are a 413, not a 500.

    DRF streams the body past Django's own limit, so the check has to happen here.
    """

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        limit = int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0)
        request = (parser_context or {}).get("request")
        length = request.META.get("CONTENT_LENGTH") if request is not None else None
        if limit and length and str(length).isdigit() and int(length) > limit:
            raise PayloadTooLarge(limit)
        body = stream.read(limit + 1) if limit else stream.read()
        if limit and len(body) > limit:
            raise PayloadTooLarge(limit)
        return super().parse(io.BytesIO(body), media_type, parser_context)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (what `kubectl patch --type=merge` does): null deletes."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def kind_field(*kinds: str) -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=list(kinds),
        required=False,
        error_messages={"invalid_choice": f"must be one of {', '.join(kinds)}"},
    )


IGNORED = "Ignored (read only; accepted so that a GET's answer can be sent back)."


class StrictSerializer(serializers.Serializer[Any]):
    """A request body whose unknown fields are errors (with the field errors, all at once);
    issuance.api.schema documents it with `additionalProperties: false`."""

    reject_unknown_fields: ClassVar[bool] = True

    def to_internal_value(self, data: Any) -> Any:
        errors: dict[str, Any] = {}
        if isinstance(data, Mapping):
            errors = {k: ["unsupported field"] for k in data if k not in self.fields}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            detail = (
                exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
            )
            raise serializers.ValidationError({**errors, **detail}) from None
        if errors:
            raise serializers.ValidationError(errors)
        return value


NAME_HELP = (
    "The resource's name (or metadata.name; if both are given they must be equal). On PUT "
    "and PATCH it may be left out; if given it must be the name in the URL, as the "
    "Kubernetes API answers a manifest whose name differs from its URL's (400: a resource "
    "is never renamed)."
)


class ResourceWriteSerializer(StrictSerializer):
    """Request body: {"name", "spec"}, or a cert-manager manifest (apiVersion, kind,
    metadata.name, spec). `status` and read-only fields sent back from a GET are ignored;
    any other field is an error. Each resource's subclass names the kinds it accepts and
    the shape of its spec (issuance.api.spec_schemas)."""

    name = NameField(required=False, help_text=NAME_HELP)
    spec: Any = SpecField("", help_text="The resource's spec, as in cert-manager.")
    apiVersion = serializers.ChoiceField(
        choices=[API_VERSION],
        required=False,
        error_messages={"invalid_choice": f"must be {API_VERSION}"},
    )
    kind = kind_field()  # each resource's subclass names its kinds
    metadata: Any = MetadataField(required=False)  # a Certificate's also takes labels
    status = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    createdAt = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    updatedAt = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)
    generation = serializers.JSONField(required=False, allow_null=True, help_text=IGNORED)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        meta_name = (attrs.get("metadata") or {}).get("name")
        if attrs.get("name") and meta_name and attrs["name"] != meta_name:
            raise serializers.ValidationError({"metadata.name": ["differs from name"]})
        attrs["name"] = attrs.get("name") or meta_name
        if self.partial:
            attrs.setdefault("spec", {})  # a merge patch that changes no spec field
        return attrs


SPEC_HELP = "The resource's spec, as in cert-manager."


class IssuerWriteSerializer(ResourceWriteSerializer):
    kind = kind_field("Issuer", "ClusterIssuer")
    spec = SpecField("IssuerSpec", help_text=SPEC_HELP)


class CertificateWriteSerializer(ResourceWriteSerializer):
    kind = kind_field("Certificate")
    spec = SpecField("CertificateSpec", help_text=SPEC_HELP)
    metadata = LabelledMetadataField(required=False)


class CertificateRequestWriteSerializer(ResourceWriteSerializer):
    kind = kind_field("CertificateRequest")
    spec = SpecField("CertificateRequestSpec", help_text=SPEC_HELP)


class ActionBodySerializer(serializers.Serializer[Any]):
    """Body of approve/deny: a reason (CamelCase word) and a free-text message."""

    reason = StrictCharField(required=False, allow_blank=True, max_length=128)
    message = StrictCharField(required=False, allow_blank=True, max_length=1024)


class ApiViewSet(QueryParamsMixin, viewsets.GenericViewSet[Any]):
    """Base for the API's viewsets: JSON bodies only, checked query strings, declared filters."""

    parser_classes = [LimitedJSONParser]
    filter_backends = [QueryFilterBackend]
    # The row group of the permission table (issuance.access.permissions) and the DRF
    # actions whose name there differs from the usual mapping (issuance.api.permissions).
    resource: ClassVar[str]
    permission_actions: ClassVar[dict[str, str]] = {}


class ResourceViewSet(ApiViewSet):
    """Base for resource viewsets: lookup by name (names may contain dots)."""

    lookup_field = "name"
    lookup_value_regex = r"[^/]+"

    def actor(self) -> str:
        return str(self.request.user.get_username())

    def get_object(self) -> Any:
        name = self.kwargs[self.lookup_field]
        if not NAME_RE.fullmatch(name):
            # Cannot exist (and PostgreSQL text cannot hold some characters, e.g. NUL).
            model = self.get_queryset().model
            raise NotFound(f"No {model._meta.object_name} matches the given query.")
        return super().get_object()


def read_write_body(
    request: Request,
    serializer_class: type[ResourceWriteSerializer],
    partial: bool = False,
    url_name: str | None = None,
) -> dict[str, Any]:
    """The checked body; on PUT and PATCH (`url_name`), a name in it must be the URL's."""
    serializer = serializer_class(data=request.data, partial=partial)
    serializer.is_valid(raise_exception=True)
    body = dict(serializer.validated_data)
    if url_name is not None and body.get("name") not in (None, url_name):
        raise serializers.ValidationError(
            {"name": [f"must be the name in the URL ({url_name!r}): a resource is not renamed"]}
        )
    return body


def warn_ignored(request: Request, response: Response) -> Response:
    """Name the Kubernetes-added fields the body carried (kubernetes_metadata) in a
    `Warning: 299 - "…"` header, as the Kubernetes API server warns, so a manifest copied
    out of a cluster applies and the client is told what was not kept."""
    notes = ignored_fields(request.data)
    if notes:
        response["Warning"] = ", ".join(f'299 - "{note}"' for note in notes)
    return response
