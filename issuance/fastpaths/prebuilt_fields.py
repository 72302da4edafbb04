"""Serializer output through fields built once per class (`PrebuiltFieldsMixin`).

DRF deep-copies every declared field for each serializer instance before converting one
object; a Certificate and its status have ~20 fields, a tenth of an API create's CPU. This
overrides DRF's private `_readable_fields`, so it is checked against DRF's own output
(tests/fastpaths/test_prebuilt_fields.py) and must be re-checked when DRF changes.

Measured (docs/decisions/0004-bypasses.md): DRF's own field copies cost the web process
0.6 ms more per certificate, 11 % of its CPU. Unnecessary if DRF stops deep-copying
declared fields per instance.
"""

from __future__ import annotations

from typing import Any, cast

from rest_framework import serializers


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
