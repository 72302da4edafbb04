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
- 429 where a token authenticates (too many bad tokens from one address, issuance.access.signin);
- anything else a view declares in `extra_error_statuses` (method → statuses), e.g. the
  bootstrap API's 429.

A `{name}` path parameter is always a resource name (a Kubernetes object name), so it gets
that pattern: a name that cannot exist is answered 404 without a query. Cluster mode's
`{cluster}` and `{namespace}` are DNS labels (`{cluster}` may be "-": every cluster).
"""

from __future__ import annotations

import re
from typing import Any

from django.core.validators import ProhibitNullCharactersValidator
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework.authentication import SessionAuthentication

from issuance.api.permissions import RolePermission, rule_of
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
    429: "Too many requests of this client, or too many invalid tokens or failed sign-ins "
    "from its address (`Retry-After` says when to try again).",
}
# As `not`: a pattern would make drf-spectacular add a oneOf for "". The type keeps a null
# (a nullable field) valid: `pattern` alone holds for anything that is not a string.
NO_NUL = {"type": "string", "pattern": "\\x00"}
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's AutoSchema plus the error answers and name patterns above."""

    def get_operation(
        self, path: str, path_regex: str, path_prefix: str, method: str, registry: Any
    ) -> dict[str, Any] | None:
        operation: dict[str, Any] | None = super().get_operation(
            path, path_regex, path_prefix, method, registry
        )
        rule = rule_of(self.view, method)
        if operation is not None and rule is not None:
            # The role from the one permission table (issuance.access.permissions): in the
            # text for people, and as an extension for tools.
            text = f"**Permission:** {rule.describe()}"
            described = operation.get("description", "")
            operation["description"] = f"{described}\n\n{text}" if described else text
            operation["x-permission"] = {
                "resource": rule.resource,
                "action": rule.action,
                "roles": list(rule.roles),
                "reach": rule.reach,
            }
        return operation

    def get_tags(self) -> list[str]:
        # Operations grouped by resource (certificates, issuers, ...) in the API reference
        # (/api/docs/), not all under the version segment every path starts with. The
        # operation ids keep their `v1_` (generated clients name their methods by them).
        tokens = self._tokenize_path()
        if tokens and re.fullmatch(r"v\d+", tokens[0]):
            tokens = tokens[1:]
        return tokens[:1]

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
        if any(getattr(a, "limits_bad_tokens", False) for a in self.view.get_authenticators()):
            statuses.add(429)  # issuance.access.signin: too many bad tokens from one address
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

    def _map_serializer_field(
        self, field: Any, direction: Any, bypass_extensions: bool = False
    ) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(  # type: ignore[no-untyped-call]
            field, direction, bypass_extensions
        )
        # DRF refuses a NUL character in every CharField ("Null characters are not allowed").
        if (
            direction == "request"
            and schema.get("type") == "string"
            and not {"not", "pattern", "enum"} & set(schema)
            and any(isinstance(v, ProhibitNullCharactersValidator) for v in field.validators)
        ):
            schema["not"] = dict(NO_NUL)
        return schema

    def _get_parameters(self) -> list[dict[str, Any]]:
        parameters: list[dict[str, Any]] = super()._get_parameters()
        for parameter in parameters:
            if parameter["in"] == "path" and parameter["name"] in PATH_SCHEMAS:
                parameter["schema"] = dict(PATH_SCHEMAS[parameter["name"]])
        return parameters


class SpecFieldExtension(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """A resource's `spec` (issuance.api.fields.SpecField) is a component of its own, from
    issuance.api.spec_schemas: `CertificateSpec`, and `CertificateSpecPatch` for a merge
    patch."""

    target_class = "issuance.api.fields.SpecField"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        from issuance.api.spec_schemas import spec_schema

        patch = direction == "request" and auto_schema.method == "PATCH"
        name = self.target.component + ("Patch" if patch else "")
        component = ResolvedComponent(  # type: ignore[no-untyped-call]
            name=name,
            type=ResolvedComponent.SCHEMA,
            object=name,
            schema=spec_schema(self.target.component, patch=patch),
        )
        auto_schema.registry.register_on_missing(component)
        return component.ref


LABELS_HELP = (
    "The Certificate's Kubernetes labels, which ACME solvers' selector.matchLabels select "
    "by. POST and PUT replace them (absent: none); in a PATCH they are merged (a null "
    "value removes a label, null removes them all)."
)


class LabelledMetadataExtension(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """A Certificate's `metadata` (issuance.api.fields.LabelledMetadataField in a write
    body, CertificateMetadataOutField in an answer): name and labels, the labels' values
    as Kubernetes checks them (in a PATCH, null too: it removes the label)."""

    target_class = "issuance.api.fields.LabelledMetadataField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        from issuance.api.fields import labelled_metadata_schema
        from issuance.api.spec_schemas import labels_schema

        patch = direction == "request" and auto_schema.method == "PATCH"
        # null labels: none (POST, PUT), or all removed (PATCH).
        labels = {**labels_schema(LABELS_HELP, patch=patch), "nullable": True}
        return labelled_metadata_schema(labels)


class CertificateMetadataOutExtension(OpenApiSerializerFieldExtension):  # type: ignore[no-untyped-call]
    """A Certificate's `metadata` as answered: {name, labels}."""

    target_class = "issuance.api.fields.CertificateMetadataOutField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> Any:
        from issuance.api.spec_schemas import labels_schema

        labels = labels_schema("The Certificate's Kubernetes labels.")
        return {
            "type": "object",
            "readOnly": True,
            "properties": {"name": NAME_SCHEMA, "labels": labels},
            "required": ["name", "labels"],
        }
