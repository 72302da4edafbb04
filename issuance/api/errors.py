"""Error responses: field-path validation errors, 409 for conflicts, 413 for big bodies,
JSON 404s for paths under /api/ that match nothing."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import IntegrityError
from django.db.models import ProtectedError
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from issuance.models import ImmutableSpecError
from issuance.operations.actions import ActionError
from issuance.specs.errors import SpecError


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"Request body is larger than the limit of {limit} bytes (MAX_BODY_BYTES)."
        )


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


def _protected_message(exc: ProtectedError) -> str:
    users = sorted(
        {f"{type(o).__name__}/{getattr(o, 'name', o.pk)}" for o in exc.protected_objects}
    )
    shown = ", ".join(users[:10]) + (f" and {len(users) - 10} more" if len(users) > 10 else "")
    return f"Still in use by {shown}; delete or move those first."


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, SpecError):
        return Response(exc.as_dict(), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, ImmutableSpecError):
        return Response({"detail": str(exc), "fields": exc.fields}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ActionError):
        return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, ProtectedError):
        return Response({"detail": _protected_message(exc)}, status=status.HTTP_409_CONFLICT)
    if isinstance(exc, IntegrityError):
        return Response(
            {"detail": "Conflicting concurrent change; retry the request."},
            status=status.HTTP_409_CONFLICT,
        )
    if isinstance(exc, RequestDataTooBig):
        from django.conf import settings

        exc = PayloadTooLarge(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    if isinstance(exc, ValidationError) and isinstance(exc.detail, dict):
        exc.detail = flat_errors(exc.detail)
    return drf_exception_handler(exc, context)


def flat_errors(detail: Any, path: str = "") -> dict[str, Any]:
    """Nested serializer errors as field paths, the shape spec errors have (and the schema's
    ValidationError says): {"issuerRef": {"name": [...]}} → {"issuerRef.name": [...]},
    {"usages": {1: [...]}} → {"usages[1]": [...]}."""
    if isinstance(detail, list):
        return {path or "non_field_errors": detail}
    flat: dict[str, Any] = {}
    for key, value in detail.items():
        inner = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}".lstrip(".")
        if isinstance(value, dict):
            flat.update(flat_errors(value, inner))
        else:
            flat[inner] = value
    return flat


@csrf_exempt
def not_found(request: HttpRequest, path: str = "") -> JsonResponse:
    """Any other path under /api/ (e.g. an event id that is not a number): the API's JSON
    404, not the console's page."""
    return JsonResponse({"detail": "Not found."}, status=404)
