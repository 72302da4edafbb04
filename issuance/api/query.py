"""Query parameters: declared once per view, checked in one place, documented from the same list.

A view declares its list filters (`filters = (QueryFilter(...), ...)`); list actions also take
`limit` and `offset`, and every view takes DRF's `format`. `QueryParamsMixin.initial` checks
the query string after authentication and permissions, before the handler runs, and answers
400 naming each offending parameter (all of them at once, like a body's field errors):

- a parameter the action does not take, or one given more than once;
- a text value with a control character (PostgreSQL text cannot hold NUL, and no name,
  DNS name or reason contains one);
- an enum value outside its choices, a boolean other than true/false;
- `limit` outside 1..MAX_LIMIT, `offset` below 0, either not a decimal integer.

`QueryFilterBackend` applies the checked values and turns the same declarations into the
OpenAPI parameters (drf-spectacular reads them from the backend), so the schema and the
checks cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, ClassVar

from django.db.models import Q, QuerySet
from rest_framework.exceptions import ValidationError
from rest_framework.filters import BaseFilterBackend
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

# DRF's URL_FORMAT_OVERRIDE (`?format=json`, `?format=api` for the browsable API).
FORMAT_PARAM = "format"
LIMIT_PARAM = "limit"
OFFSET_PARAM = "offset"
MAX_LIMIT = 1000
# OFFSET is a bigint in PostgreSQL.
MAX_OFFSET = 2**63 - 1

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f]")
# The same rule as a JSON Schema pattern (ECMA-262 syntax).
TEXT_PATTERN = "^[^\\u0000-\\u001f\\u007f]*$"
DECIMAL = re.compile(r"[0-9]{1,19}")


@dataclass(frozen=True)
class QueryFilter:
    """`?param=value` → `queryset.filter(lookup=value)`, or `queryset.filter(to_q(value))`
    for a filter that is no single lookup; an empty text value filters nothing."""

    param: str
    lookup: str
    description: str = ""
    choices: tuple[str, ...] = ()
    boolean: bool = False
    lowercase: bool = False
    to_q: Callable[[Any], Q] | None = None

    def parse(self, raw: str) -> str | bool | None:
        """The value to filter by (None: no filter); ValueError says what is wrong."""
        if self.boolean:
            if raw.lower() not in {"true", "false"}:
                raise ValueError("must be true or false")
            return raw.lower() == "true"
        if self.choices:
            if raw not in self.choices:
                raise ValueError(f"must be one of: {', '.join(self.choices)}")
            return raw
        if CONTROL_CHARACTERS.search(raw):
            raise ValueError("must not contain control characters")
        value = raw.strip()
        if self.lowercase:
            value = value.lower()
        return value or None

    def schema(self) -> dict[str, Any]:
        """The OpenAPI parameter object."""
        value: dict[str, Any]
        if self.boolean:
            value = {"type": "boolean"}
        elif self.choices:
            value = {"type": "string", "enum": list(self.choices)}
        else:
            value = {"type": "string", "pattern": TEXT_PATTERN}
        parameter: dict[str, Any] = {
            "name": self.param,
            "in": "query",
            "required": False,
            "schema": value,
        }
        if self.description:
            parameter["description"] = self.description
        return parameter


def _count(raw: str, *, minimum: int, maximum: int) -> int:
    value = int(raw) if DECIMAL.fullmatch(raw) else None
    if value is None or not minimum <= value <= maximum:
        raise ValueError(f"must be a whole number from {minimum} to {maximum}")
    return value


def parse_limit(raw: str) -> int:
    return _count(raw, minimum=1, maximum=MAX_LIMIT)


def parse_offset(raw: str) -> int:
    return _count(raw, minimum=0, maximum=MAX_OFFSET)


PAGE_PARAMS = {LIMIT_PARAM: parse_limit, OFFSET_PARAM: parse_offset}


def check_query(
    request: Request, filters: Collection[QueryFilter], paginated: bool
) -> dict[str, Any]:
    """The filter values of this request (param → value; absent and empty ones left out).

    Raises ValidationError({param: [message]}) naming every parameter that is not right.
    """
    by_name = {f.param: f for f in filters}
    errors: dict[str, list[str]] = {}
    values: dict[str, Any] = {}
    for param in request.query_params:
        given = request.query_params.getlist(param)
        try:
            if len(given) > 1:
                raise ValueError("given more than once")
            if param in by_name:
                value = by_name[param].parse(given[0])
                if value is not None:
                    values[param] = value
            elif paginated and param in PAGE_PARAMS:
                PAGE_PARAMS[param](given[0])
            elif param != FORMAT_PARAM:
                raise ValueError(_unknown(by_name, paginated))
        except ValueError as exc:
            errors[param] = [str(exc)]
    if errors:
        raise ValidationError(errors)
    return values


def _unknown(filters: Collection[str], paginated: bool) -> str:
    known = [*filters, *(PAGE_PARAMS if paginated else ())]
    if not known:
        return "unknown query parameter; this endpoint takes none"
    return f"unknown query parameter; this endpoint takes: {', '.join(sorted(known))}"


class QueryParamsMixin:
    """For API views: check the query string (module docstring) before the handler runs.

    List actions of a view with `filters` and a paginator take those; every other action
    takes no parameter but `format`. The checked filter values are in `self.query`.
    """

    filters: ClassVar[tuple[QueryFilter, ...]] = ()
    query: dict[str, Any]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # type: ignore[misc]
        if not hasattr(self, str(request.method).lower()):
            return  # no handler: the answer is 405, whatever the query says
        listing = getattr(self, "action", None) == "list"
        filters = self.filters if listing else ()
        paginated = listing and getattr(self, "pagination_class", None) is not None
        self.query = check_query(request, filters, paginated)


class QueryFilterBackend(BaseFilterBackend):
    """Applies the checked values of the view's `filters` to list querysets."""

    def filter_queryset(self, request: Request, queryset: QuerySet[Any], view: Any) -> Any:
        if getattr(view, "action", None) != "list":
            return queryset  # a detail lookup is by name alone
        checked: dict[str, Any] = getattr(view, "query", {})
        for query_filter in getattr(view, "filters", ()):
            if query_filter.param not in checked:
                continue
            value = checked[query_filter.param]
            if query_filter.to_q is not None:
                queryset = queryset.filter(query_filter.to_q(value))
            else:
                queryset = queryset.filter(**{query_filter.lookup: value})
        return queryset

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [f.schema() for f in getattr(view, "filters", ())]


class Pagination(LimitOffsetPagination):
    """LimitOffsetPagination with the checked limit and offset (DRF ignores bad values)."""

    max_limit = MAX_LIMIT

    def get_limit(self, request: Request) -> int:
        raw = request.query_params.get(LIMIT_PARAM)
        return int(self.default_limit or MAX_LIMIT) if raw is None else parse_limit(raw)

    def get_offset(self, request: Request) -> int:
        raw = request.query_params.get(OFFSET_PARAM)
        return 0 if raw is None else parse_offset(raw)

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": LIMIT_PARAM,
                "required": False,
                "in": "query",
                "description": f"Number of results to return per page (at most {MAX_LIMIT}).",
                "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            },
            {
                "name": OFFSET_PARAM,
                "required": False,
                "in": "query",
                "description": "The initial index from which to return the results.",
                "schema": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
            },
        ]
