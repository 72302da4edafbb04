"""Shared API parts: the size-limited JSON parser, the write serializer, viewset base."""

from __future__ import annotations

import copy
import io
from collections.abc import Mapping
from typing import Any, ClassVar, cast

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers, viewsets
from rest_framework.parsers import JSONParser
from rest_framework.request import Request

from issuance.api.errors import PayloadTooLarge
from issuance.models.base import validate_resource_name

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


class ResourceWriteSerializer(serializers.Serializer[Any]):
    """Request body: {"name", "spec"}, or a cert-manager manifest (apiVersion, kind,
    metadata.name, spec). `status` and read-only fields sent back from a GET are ignored."""

    IGNORED: ClassVar[tuple[str, ...]] = ("status", "createdAt", "updatedAt", "generation")

    name = serializers.CharField(required=False, max_length=253)
    spec = serializers.JSONField()
    apiVersion = serializers.CharField(required=False)
    kind = serializers.CharField(required=False)
    metadata = serializers.JSONField(required=False)

    def __init__(self, *args: Any, kinds: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kinds = kinds

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        known = set(self.fields) | set(self.IGNORED)
        unknown = sorted(k for k in getattr(self, "initial_data", {}) if k not in known)
        errors: dict[str, list[str]] = {k: ["unsupported field"] for k in unknown}
        metadata = attrs.get("metadata") or {}
        if not isinstance(metadata, dict):
            errors["metadata"] = ["must be an object"]
            metadata = {}
        meta_name = metadata.get("name")
        name = attrs.get("name") or meta_name
        if attrs.get("name") and meta_name and attrs["name"] != meta_name:
            errors["metadata.name"] = ["differs from name"]
        if name is not None:
            try:
                validate_resource_name(str(name))
            except DjangoValidationError as exc:
                errors["name"] = list(exc.messages)
        if attrs.get("apiVersion") not in (None, API_VERSION):
            errors["apiVersion"] = [f"must be {API_VERSION}"]
        if self.kinds and attrs.get("kind") not in (None, *self.kinds):
            errors["kind"] = [f"must be one of {', '.join(self.kinds)}"]
        if not isinstance(attrs.get("spec"), dict):
            errors["spec"] = ["must be an object"]
        if errors:
            raise serializers.ValidationError(errors)
        attrs["name"] = name
        return attrs


class PrebuiltFieldsMixin:
    """Represent objects through fields built once per class, not copied per serializer.

    DRF deep-copies every declared field for each serializer instance (a Certificate and its
    status: ~20 fields, a tenth of an API create's CPU) before converting one object. Only
    for serializers whose fields just convert values (no `context`, no relations, no
    request): those fields hold no per-request state, so one bound set per class serves
    every thread. The output is DRF's own `to_representation` over the same fields.
    `.fields` (schema, validation, the browsable API) is untouched.
    """

    @property
    def _readable_fields(self) -> list[serializers.Field[Any, Any, Any, Any]]:
        cls = type(self)
        fields: list[serializers.Field[Any, Any, Any, Any]] | None = cls.__dict__.get(
            "_prebuilt_fields"
        )
        if fields is None:
            prototype = cast("serializers.Serializer[Any]", cls())
            fields = [f for f in prototype.fields.values() if not f.write_only]
            cls._prebuilt_fields = fields  # type: ignore[attr-defined]
        return fields


class ActionBodySerializer(serializers.Serializer[Any]):
    """Body of approve/deny: a reason (CamelCase word) and a free-text message."""

    reason = serializers.CharField(required=False, allow_blank=True, max_length=128)
    message = serializers.CharField(required=False, allow_blank=True, max_length=1024)


class ResourceViewSet(viewsets.GenericViewSet[Any]):
    """Base for resource viewsets: lookup by name (names may contain dots), JSON bodies only."""

    lookup_field = "name"
    lookup_value_regex = r"[^/]+"
    parser_classes = [LimitedJSONParser]
    required_roles: ClassVar[dict[str, str]] = {}

    def actor(self) -> str:
        return str(self.request.user.get_username())

    def query_param(self, name: str) -> str:
        return str(self.request.query_params.get(name) or "").strip()

    def filter_exact(self, qs: Any, params: tuple[tuple[str, str], ...]) -> Any:
        """Apply `?param=value` as `lookup=value` for each (param, lookup) that is given."""
        return filter_exact(self.request, qs, params)


def filter_exact(request: Request, qs: Any, params: tuple[tuple[str, str], ...]) -> Any:
    for param, lookup in params:
        value = str(request.query_params.get(param) or "").strip()
        if value:
            qs = qs.filter(**{lookup: value})
    return qs


def read_write_body(request: Request, kinds: tuple[str, ...]) -> dict[str, Any]:
    serializer = ResourceWriteSerializer(data=request.data, kinds=kinds)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)
