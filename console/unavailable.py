"""503 while the database is unavailable: JSON for the API, a plain page for browsers.

This module is the one place that turns "the database cannot be reached" into an answer,
through the hooks Django offers wherever the error can surface:

- before the request (DatabaseUnavailableMiddleware): while the process knows the
  database is down (issuance.availability), the request is answered at once without it;
- in a view, a DRF view included (DRF re-raises errors it has no answer for), or while a
  template response renders: the middleware's process_exception;
- in another middleware (e.g. the session loaded for CSRF_USE_SESSIONS): Django's 500
  handler, `server_error` (console.urls);
- a session that cannot be saved on the way out, which Django's SessionMiddleware reports
  as SessionInterrupted, a 400: the 400 handler, `bad_request` (console.urls);
- a WebSocket handshake (its session lookup): WebSocketsWhileUnavailable (console.asgi).

The answer never touches the database: no session, no user, no context processors (pages
are rendered without the request). API answers are
`{"detail": "The database is unavailable; retry shortly.", "code": "database_unavailable"}`
with `Retry-After`, and are never cached. With DEBUG on, Django shows its technical page
instead of calling the 500 handler, so only the first two apply.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import Any

from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseServerError,
    JsonResponse,
)
from django.template.loader import render_to_string
from django.utils.cache import add_never_cache_headers, patch_vary_headers
from django.views import defaults

from issuance.availability import availability, is_unavailable_error

DETAIL = "The database is unavailable; retry shortly."
CODE = "database_unavailable"
RETRY_AFTER_SECONDS = 5
API_PREFIX = "/api/"
Scope = dict[str, Any]


def wants_json(request: HttpRequest) -> bool:
    """API paths, and clients that ask for JSON rather than a page."""
    if request.path_info.startswith(API_PREFIX):
        return True
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


def unavailable_response(request: HttpRequest) -> HttpResponse:
    response: HttpResponse
    if wants_json(request):
        response = JsonResponse({"detail": DETAIL, "code": CODE}, status=503)
    else:
        # Rendered without the request (no context processors: no session, no user). A
        # page that was only being read reloads itself until the database is back.
        reload = RETRY_AFTER_SECONDS if request.method in ("GET", "HEAD") else None
        response = HttpResponse(render_to_string("503.html", {"reload": reload}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    add_never_cache_headers(response)
    patch_vary_headers(response, ["Accept"])
    # Not one "Service Unavailable" log line per request: issuance.availability logs the
    # outage once (this is the flag django.utils.log.log_response honours).
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


class DatabaseUnavailableMiddleware:
    """Answers 503 when the database cannot be reached (see the module's docstring).

    Placed after WhiteNoise (static files need no database) and before the session and
    authentication middleware (which use it).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        if not availability.usable():
            return unavailable_response(request)
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_unavailable_error(exception):
            return None
        availability.failed(exception)
        return unavailable_response(request)


class WebSocketsWhileUnavailable:
    """ASGI, around the WebSocket stack: its session lookup needs the database. While the
    database is unavailable a handshake is refused at once (HTTP 403, and live.js retries
    later) rather than failed with a 500 and a logged traceback."""

    TRY_AGAIN_LATER = 1013  # WebSocket close code, for a socket already accepted

    def __init__(self, app: Callable[[Scope, Any, Any], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        if not availability.usable():
            await send({"type": "websocket.close", "code": self.TRY_AGAIN_LATER})
            return
        try:
            await self.app(scope, receive, send)
        except Exception as exc:
            if not is_unavailable_error(exc):
                raise
            availability.failed(exc)
            await send({"type": "websocket.close", "code": self.TRY_AGAIN_LATER})


def server_error(request: HttpRequest) -> HttpResponseBase:
    """handler500: 503 when the error being handled means the database is unavailable, else
    500.html. Unlike Django's default, no CSRF processing (which may read the session)."""
    exc = sys.exception()
    if exc is not None and is_unavailable_error(exc):
        availability.failed(exc)
        return unavailable_response(request)
    return HttpResponseServerError(render_to_string("500.html"))


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponseBase:
    """handler400: 503 for a 400 that a database outage caused (SessionInterrupted, raised
    while handling the failed session save), Django's own 400 otherwise."""
    if is_unavailable_error(exception):
        availability.failed(exception)
        return unavailable_response(request)
    return defaults.bad_request(request, exception)


# -- OpenAPI ------------------------------------------------------------------------------

SCHEMA_COMPONENT = "DatabaseUnavailable"


def document_503(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: every operation may answer 503 (see above)."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas[SCHEMA_COMPONENT] = {
        "type": "object",
        "properties": {
            "detail": {"type": "string", "example": DETAIL},
            "code": {"type": "string", "enum": [CODE]},
        },
        "required": ["detail", "code"],
    }
    answer = {
        "description": "The database is unavailable; retry after the Retry-After seconds.",
        "headers": {"Retry-After": {"schema": {"type": "integer"}}},
        "content": {
            "application/json": {"schema": {"$ref": f"#/components/schemas/{SCHEMA_COMPONENT}"}}
        },
    }
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict) and "responses" in operation:
                operation["responses"].setdefault("503", answer)
    return result
