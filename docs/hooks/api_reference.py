"""mkdocs hook: the API reference page, rendered from the OpenAPI schema at build time.

The schema is drf-spectacular's, generated from the code exactly as `/api/schema/` serves
it, so the reference cannot drift from the API. docs/reference/api.md holds the prose and a
`<!-- generated: api-reference -->` marker that this hook replaces with every operation
(grouped by tag and resource: method, path, description, parameters, request body fields
with required/enum/pattern/format/limits, responses) and every component schema.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- generated: api-reference -->"
METHODS = ("get", "post", "put", "patch", "delete")
REF_PREFIX = "#/components/schemas/"

_schema: dict[str, Any] | None = None


def openapi_schema() -> dict[str, Any]:
    """The schema `/api/schema/` serves, made once per build (Django set up for it)."""
    global _schema  # noqa: PLW0603  # one schema per mkdocs process
    if _schema is None:
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        # Settings refuse to load without these; the schema needs neither a real key nor a
        # database.
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
        os.environ.setdefault("KEY_ENCRYPTION_KEY", "docs")
        os.environ.setdefault("DEBUG", "1")
        import django

        django.setup()
        from drf_spectacular.generators import SchemaGenerator
        from drf_spectacular.renderers import OpenApiJsonRenderer

        generated = SchemaGenerator().get_schema(request=None, public=True)  # type: ignore[no-untyped-call]
        # Through the JSON renderer, as /api/schema/?format=json does: plain JSON types only.
        _schema = json.loads(OpenApiJsonRenderer().render(generated, renderer_context={}))
    return _schema


def code(text: object) -> str:
    """Inline code that survives backticks in the text (patterns have them)."""
    value = "null" if text is None else str(text)
    if isinstance(text, bool):
        value = "true" if text else "false"
    if "`" not in value:
        return f"`{value}`"
    return f"`` {value} ``"


def one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def ref_name(ref: str) -> str:
    return ref.removeprefix(REF_PREFIX)


def type_of(schema: Mapping[str, Any]) -> str:
    """A short name for a schema's type, with links to component schemas."""
    if "$ref" in schema:
        name = ref_name(schema["$ref"])
        return f"[{name}](#{anchor(name)})"
    for combinator, word in (("oneOf", " or "), ("anyOf", " or ")):
        if combinator in schema and "type" not in schema:
            return word.join(type_of(s) for s in schema[combinator])
    if "allOf" in schema and len(schema["allOf"]) == 1:
        text = type_of(schema["allOf"][0])
    else:
        kind = schema.get("type", "any")
        if isinstance(kind, list):
            kind = " or ".join(kind)
        if kind == "array":
            text = f"array of {type_of(schema.get('items', {}))}"
        elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
            text = f"object of {type_of(schema['additionalProperties'])}"
        else:
            text = str(kind)
        if "format" in schema:
            text += f" ({schema['format']})"
    if schema.get("nullable"):
        text += " or null"
    return text


def constraints(schema: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    if "enum" in schema:
        out.append("one of " + ", ".join(code(v) for v in schema["enum"]))
    if "pattern" in schema:
        out.append(f"pattern {code(schema['pattern'])}")
    if "not" in schema and "pattern" in schema["not"]:
        out.append(f"not matching {code(schema['not']['pattern'])}")
    for key, word in (
        ("minLength", "at least {} characters"),
        ("maxLength", "at most {} characters"),
        ("minimum", "at least {}"),
        ("maximum", "at most {}"),
        ("minItems", "at least {} items"),
        ("maxItems", "at most {} items"),
        ("minProperties", "at least {} fields"),
        ("maxProperties", "at most {} fields"),
    ):
        if key in schema:
            out.append(word.format(schema[key]))
    if schema.get("uniqueItems"):
        out.append("no duplicates")
    if "default" in schema:
        out.append(f"default {code(json.dumps(schema['default']))}")
    if schema.get("readOnly"):
        out.append("read-only")
    if schema.get("writeOnly"):
        out.append("write-only")
    items = schema.get("items")
    if isinstance(items, Mapping) and "$ref" not in items:
        out += [f"each {c}" for c in constraints(items) if c not in {"read-only", "write-only"}]
    return out


def field_lines(schema: Mapping[str, Any], indent: str = "") -> Iterator[str]:
    """One list item per property, nested objects as nested lists."""
    if "allOf" in schema and len(schema["allOf"]) == 1 and "$ref" not in schema["allOf"][0]:
        schema = schema["allOf"][0]
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        parts = [type_of(prop)]
        if name in required:
            parts.append("**required**")
        line = f"{indent}- {code(name)} ({', '.join(parts)})"
        details = []
        if prop.get("description"):
            details.append(one_line(prop["description"]).rstrip(".") + ".")
        rules = constraints(prop)
        if rules:
            details.append("; ".join(rules).capitalize() + ".")
        if details:
            line += ": " + " ".join(details)
        yield line
        if prop.get("type") == "object" and "properties" in prop:
            yield from field_lines(prop, indent + "    ")
    extra = schema.get("additionalProperties")
    if extra is False:
        yield f"{indent}- No other fields."


def schema_section(name: str, schema: Mapping[str, Any]) -> list[str]:
    lines = [f"### {name} {{#{anchor(name)}}}", ""]
    if schema.get("description"):
        lines += [one_line(schema["description"]), ""]
    fields = list(field_lines(schema))
    if fields:
        lines += [*fields, ""]
    alternatives = schema.get("oneOf") or schema.get("anyOf")
    if alternatives:
        lines += ["Exactly one of:" if "oneOf" in schema else "Any of:", ""]
        lines += [f"- {type_of(alt)}" for alt in alternatives]
        lines.append("")
    if not fields and not alternatives:
        rules = constraints(schema)
        lines += [f"{type_of(schema)}" + (": " + "; ".join(rules) if rules else "") + ".", ""]
    return lines


def body_schema(content: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]] | None:
    for media_type, body in content.items():
        if "schema" in body:
            return media_type, body["schema"]
    return None


def operation_section(method: str, path: str, operation: Mapping[str, Any]) -> list[str]:
    lines = [f"#### {method.upper()} `{path}`", ""]
    if operation.get("summary"):
        lines += [operation["summary"], ""]
    if operation.get("description"):
        lines += [operation["description"].strip(), ""]
    if operation.get("deprecated"):
        lines += ["**Deprecated.**", ""]
    parameters = operation.get("parameters", [])
    if parameters:
        lines += ["Parameters:", ""]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            parts = [parameter["in"], type_of(schema)]
            if parameter.get("required"):
                parts.append("**required**")
            line = f"- {code(parameter['name'])} ({', '.join(parts)})"
            details = []
            if parameter.get("description"):
                details.append(one_line(parameter["description"]).rstrip(".") + ".")
            rules = constraints(schema)
            if rules:
                details.append("; ".join(rules).capitalize() + ".")
            if details:
                line += ": " + " ".join(details)
            lines.append(line)
        lines.append("")
    request = operation.get("requestBody")
    if request:
        found = body_schema(request.get("content", {}))
        if found:
            media_type, schema = found
            required = "required" if request.get("required") else "optional"
            lines += [f"Request body ({code(media_type)}, {required}): {type_of(schema)}", ""]
            target: Mapping[str, Any] = schema
            if "$ref" in schema:
                target = openapi_schema()["components"]["schemas"][ref_name(schema["$ref"])]
            fields = list(field_lines(target))
            if fields:
                lines += [*fields, ""]
            examples = next(iter(request["content"].values())).get("examples", {})
            for example in list(examples.values())[:1]:
                title = example.get("summary", "Example")
                lines += [f"{title}:", "", "```json"]
                lines += [json.dumps(example.get("value"), indent=2), "```", ""]
    responses = operation.get("responses", {})
    if responses:
        lines += ["Responses:", ""]
        for status, response in responses.items():
            line = f"- {code(status)}"
            found = body_schema(response.get("content", {}))
            if found:
                line += f" {type_of(found[1])}"
            if response.get("description"):
                line += f": {one_line(response['description'])}"
            lines.append(line)
        lines.append("")
    return lines


def resource_of(path: str) -> str:
    """The resource a path is about: `/api/v1/certificates/{name}/` -> `certificates`."""
    parts = [p for p in path.split("/") if p and not p.startswith("{")]
    if parts[:2] == ["api", "v1"]:
        parts = parts[2:]
    elif parts and parts[0] == "api":
        parts = parts[1:]
    return parts[0] if parts else path


def render(schema: Mapping[str, Any]) -> str:
    groups: dict[str, dict[str, list[tuple[str, str, Mapping[str, Any]]]]] = {}
    for path, item in schema["paths"].items():
        for method in METHODS:
            if method in item:
                operation = item[method]
                tag = (operation.get("tags") or ["other"])[0]
                groups.setdefault(tag, {}).setdefault(resource_of(path), []).append(
                    (method, path, operation)
                )
    lines: list[str] = []
    for tag, resources in groups.items():
        lines += [f"## {tag}", ""]
        for resource, operations in resources.items():
            lines += [f"### {resource} {{#{tag}-{resource}}}", ""]
            for method, path, operation in operations:
                lines += operation_section(method, path, operation)
    lines += ["## Schemas", ""]
    for name, component in sorted(schema["components"]["schemas"].items()):
        lines += schema_section(name, component)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render(openapi_schema()))
