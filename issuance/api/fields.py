"""Serializer fields whose OpenAPI schema says exactly what they accept and return.

DRF's CharField also takes numbers and IntegerField strings, and JSONField any value; the
schema says "string", "integer", "object", so these fields refuse the rest (a 400 naming
the field), and carry the schema drf-spectacular shows.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from issuance.api.schema import NAME_MAX_LENGTH, NAME_SCHEMA
from issuance.models.base import validate_resource_name
from issuance.specs.kubernetes_metadata import METADATA_FIELDS


class StrictCharField(serializers.CharField):
    """Text that must be sent as a JSON string (DRF's CharField also takes numbers)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """An integer that must be sent as a JSON number without a fraction (not "5", 5.0, true)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class JsonObjectField(serializers.JSONField):
    """A JSON object; anything else is a field error. (Its subclasses say their schema.)"""

    default_error_messages: ClassVar[dict[str, Any]] = {"not_an_object": "must be an object"}

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if not isinstance(value, dict):
            self.fail("not_an_object")
        return value


@extend_schema_field({"type": "object", "additionalProperties": {}})
class ObjectField(JsonObjectField):
    """A JSON object (metadata, a policy verdict) of any shape."""


class SpecField(JsonObjectField):
    """A resource's spec: its OpenAPI shape is the component `component` of
    issuance.api.spec_schemas (in a PATCH body, a merge patch's shape), which
    issuance.api.schema puts in the schema. The spec validators check it (every problem a
    400 naming its field)."""

    def __init__(self, component: str, **kwargs: Any) -> None:
        self.component = component
        super().__init__(**kwargs)


@extend_schema_field({"type": "array", "items": {"type": "object", "additionalProperties": {}}})
class ObjectListField(serializers.JSONField):
    """A JSON list of objects (conditions, authorizations); read only."""


@extend_schema_field({"type": "string", "nullable": True, "readOnly": True})
class BlankAsNullField(serializers.ReadOnlyField):
    """Text that is null until there is some (e.g. the PEM of a certificate not issued yet)."""

    def to_representation(self, value: Any) -> Any:
        return str(value) if value else None


@extend_schema_field(NAME_SCHEMA)
class NameField(StrictCharField):
    """A resource name (a Kubernetes object name)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            max_length=NAME_MAX_LENGTH,
            trim_whitespace=False,  # " web" is not the name "web"
            validators=[validate_resource_name],
            **kwargs,
        )


@extend_schema_field(
    {
        "type": "object",
        "properties": {
            "name": NAME_SCHEMA,
            **{key: {"description": "Ignored."} for key in METADATA_FIELDS if key != "name"},
        },
        "additionalProperties": False,
    }
)
class MetadataField(ObjectField):
    """A manifest's metadata (an Issuer's, a CertificateRequest's; a Certificate's is
    LabelledMetadataField): only `name` is read; the fields `manage.py apply` takes and
    ignores (namespace, labels, annotations, what Kubernetes adds) are ignored here too, and
    any other field is refused naming it, as apply refuses it."""

    def to_internal_value(self, data: Any) -> Any:
        return checked_metadata(super().to_internal_value(data))


def checked_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Unknown fields refused, and the name checked (what both metadata fields do)."""
    unknown = {key: ["unsupported field"] for key in value if key not in METADATA_FIELDS}
    if unknown:
        raise serializers.ValidationError(unknown)
    if "name" not in value:
        return value
    if not isinstance(value["name"], str):
        raise serializers.ValidationError("name must be a string")
    try:
        validate_resource_name(value["name"])
    except DjangoValidationError as exc:
        raise serializers.ValidationError([f"name {m}" for m in exc.messages]) from None
    return value


class LabelledMetadataField(JsonObjectField):
    """A Certificate manifest's metadata: `name`, and `labels`, which are kept (the
    certificate's API checks them as Kubernetes does, issuance/specs/labels.py, after a
    PATCH's merge, so that there a null value removes a label). Its schema, with the
    labels' shape, is issuance.api.schema.LabelledMetadataExtension's (not a subclass of
    MetadataField: drf-spectacular would take that one's schema over the extension)."""

    def to_internal_value(self, data: Any) -> Any:
        return checked_metadata(super().to_internal_value(data))


def labelled_metadata_schema(labels: dict[str, Any]) -> dict[str, Any]:
    """A Certificate write body's `metadata`: name and labels read, the rest ignored."""
    properties: dict[str, Any] = {"name": NAME_SCHEMA, "labels": labels}
    for key in METADATA_FIELDS:
        properties.setdefault(key, {"description": "Ignored."})
    return {"type": "object", "properties": properties, "additionalProperties": False}


class CertificateMetadataOutField(serializers.ReadOnlyField):
    """A Certificate's metadata as answered: {name, labels} (its schema is
    issuance.api.schema.LabelledMetadataExtension's)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(source="*", **kwargs)

    def to_representation(self, value: Any) -> dict[str, Any]:
        labels = value.labels if isinstance(value.labels, dict) else {}
        return {"name": value.name, "labels": labels}
