"""The OpenAPI schema: every status an operation can answer, strict bodies, name patterns.

drf-spectacular documents the success answer a view declares; the errors come from DRF and
issuance.api.errors for whole classes of operations, so they are added here by rule rather
than repeated on every view (console.unavailable adds 503 to every operation):

- 400 everywhere: every operation checks its query string (issuance.api.query), and bodies
  are validated field by field;
- 401 everywhere (a bad or missing credential), 403 where a role or a session's CSRF check
  can refuse (views with RolePermission or SessionAuthentication);
- 404 for operations with a path parameter; 409 for every change (a conflicting state, a
  resource in use, a concurrent change); 413 and 415 where a JSON body is read;
- request bodies whose serializer sets `reject_unknown_fields` say `additionalProperties:
  false`;
- anything else a view declares in `extra_error_statuses` (method → statuses), e.g. the
  bootstrap API's 429.

A `{name}` path parameter is always a resource name (a Kubernetes object name), so it gets
that pattern: a name that cannot exist is answered 404 without a query. Cluster mode's
`{cluster}` and `{namespace}` are DNS labels (`{cluster}` may be "-": every cluster).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework.authentication import SessionAuthentication

from issuance.api.permissions import RolePermission
from issuance.models.base import NAME_RE

NAME_MAX_LENGTH = 253
NAME_SCHEMA = {"type": "string", "pattern": NAME_RE.pattern, "maxLength": NAME_MAX_LENGTH}
# Cluster mode's path parameters (issuance/api/mirrored.py): a cluster name ("-" for every
# cluster, in lists) and a namespace are DNS labels.
DNS_LABEL = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
PATH_SCHEMAS = {
    "name": NAME_SCHEMA,
    "cluster": {"type": "string", "pattern": f"^(-|{DNS_LABEL})$", "maxLength": 63},
    "namespace": {"type": "string", "pattern": f"^{DNS_LABEL}$", "maxLength": 63},
}

ERROR = "Error"
VALIDATION_ERROR = "ValidationError"
COMPONENTS: dict[str, dict[str, Any]] = {
    ERROR: {
        "type": "object",
        "description": "What went wrong, in `detail` (a conflict may add `fields`).",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
    },
    VALIDATION_ERROR: {
        "type": "object",
        "description": "Messages per field, body field path or query parameter "
        '(`{"spec.dnsNames[0]": ["..."]}`, `{"state": ["must be one of: ..."]}`), or a '
        "`detail` for a body that is not JSON.",
        "properties": {"detail": {"type": "string"}},
        "additionalProperties": {"type": "array", "items": {"type": "string"}},
    },
}
DESCRIPTIONS = {
    400: "Invalid query parameter or body (each named, with what is wrong).",
    401: "Missing, invalid, expired or revoked credentials.",
    403: "The user does not have the role this action needs (or a session's CSRF check failed).",
    404: "No such resource.",
    409: "Conflicts with the resource's state, or with a concurrent change.",
    413: "The body is larger than MAX_BODY_BYTES.",
    415: "The body is not JSON.",
    429: "Too many requests of this client are waiting.",
}
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's AutoSchema plus the error answers and name patterns above."""

    def _get_response_bodies(self, direction: Any = "response") -> dict[str, Any]:
        responses: dict[str, Any] = super()._get_response_bodies(direction)
        for status in self._error_statuses():
            # A view may declare an error status without a body (`responses={409: None}`).
            answer = responses.setdefault(str(status), {"description": DESCRIPTIONS[status]})
            component = VALIDATION_ERROR if status == 400 else ERROR
            answer.setdefault(
                "content", {"application/json": {"schema": self._component(component)}}
            )
        return responses

    def _error_statuses(self) -> list[int]:
        statuses = {400, 401}
        if self._can_refuse():
            statuses.add(403)
        if "{" in self.path:
            statuses.add(404)
        if self.method in UNSAFE_METHODS:
            statuses.add(409)
        if self._get_request_body():  # type: ignore[no-untyped-call]
            statuses |= {413, 415}
        extra: dict[str, tuple[int, ...]] = getattr(self.view, "extra_error_statuses", {})
        statuses.update(extra.get(self.method, ()))
        return sorted(statuses)

    def _can_refuse(self) -> bool:
        permissions = self.view.get_permissions()
        authenticators = self.view.get_authenticators()
        return any(isinstance(p, RolePermission) for p in permissions) or any(
            isinstance(a, SessionAuthentication) for a in authenticators
        )

    def _component(self, name: str) -> dict[str, str]:
        component = ResolvedComponent(  # type: ignore[no-untyped-call]
            name=name, type=ResolvedComponent.SCHEMA, object=name, schema=COMPONENTS[name]
        )
        self.registry.register_on_missing(component)
        return dict(component.ref)

    def _map_serializer(
        self, serializer: Any, direction: Any, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer(  # type: ignore[no-untyped-call]
            serializer, direction, bypass_extensions
        )
        if direction == "request" and getattr(serializer, "reject_unknown_fields", False):
            schema["additionalProperties"] = False
        return schema

    def _get_parameters(self) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super()._get_parameters()
        for parameter in parameters:
            if parameter["in"] == "path" and parameter["name"] in PATH_SCHEMAS:
                parameter["schema"] = dict(PATH_SCHEMAS[parameter["name"]])
        return parameters
