"""`/healthz` and `/readyz`: the answers a load balancer, systemd or a kubelet probe asks for.

- `/healthz`: the process answers HTTP. Nothing else is looked at (no database, no Redis),
  so a database outage never gets a healthy web process restarted.
- `/readyz`: the process can serve the console: the database answers and every migration
  this code knows is applied (an upgraded web process started before `migrate` ran is not
  ready). 200 or 503, JSON with the reason. The channel layer (Redis) is reported but
  never makes it unready: without it the pages work and browsers poll (console.livehealth).

Answered by a middleware placed before the host checks, the HTTPS redirect
(SECURE_REDIRECT_EXEMPT), the session, CSRF and sign-in: a probe comes from an address, not
a configured host name, over plain HTTP, without an account. They hold no secret: the
reason names a failure ("database unavailable", "2 unapplied migrations"), never a
connection string.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypedDict

from channels.layers import get_channel_layer
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.cache import add_never_cache_headers

from console.livehealth import LayerState, layer_state
from issuance.availability import availability, is_unavailable_error, one_line

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
# For SECURE_REDIRECT_EXEMPT (matched against the path without its leading slash).
REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]


class Health(TypedDict):
    status: str  # "ok"


class Readiness(TypedDict):
    status: str  # "ready" or "not ready"
    database: str  # "ok", "unavailable" or "unapplied migrations"
    reason: str  # empty when ready
    channelLayer: LayerState


class _Migrations:
    """Once every migration of this code was seen applied, it stays so for this process
    (migrations are not unapplied under a running console): later probes skip the
    migration graph, which is read from disk."""

    all_applied = False

    def unapplied(self) -> list[str]:
        if self.all_applied:
            return []
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        names = [f"{migration.app_label}.{migration.name}" for migration, _ in plan]
        self.all_applied = not names
        return names


migrations = _Migrations()


def readiness() -> tuple[int, Readiness]:
    layer = layer_state(get_channel_layer())
    if not availability.usable():  # already known down: answer at once, as pages do
        return 503, _not_ready("unavailable", "database unavailable", layer)
    try:
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute("SELECT 1")
        unapplied = migrations.unapplied()
    except DatabaseError as exc:
        if is_unavailable_error(exc):
            availability.failed(exc)  # the pages answer 503 at once from now on too
            return 503, _not_ready("unavailable", "database unavailable", layer)
        return 503, _not_ready("unavailable", f"database error: {one_line(exc)}", layer)
    if unapplied:
        shown = ", ".join(unapplied[:5]) + (", …" if len(unapplied) > 5 else "")
        reason = f"{len(unapplied)} unapplied migration(s): {shown} (run `migrate`)"
        return 503, _not_ready("unapplied migrations", reason, layer)
    return 200, {"status": "ready", "database": "ok", "reason": "", "channelLayer": layer}


def _not_ready(database: str, reason: str, layer: LayerState) -> Readiness:
    return {"status": "not ready", "database": database, "reason": reason, "channelLayer": layer}


class ProbeMiddleware:
    """Answers the two probe paths before anything that needs a host name, HTTPS, a session
    or the database (see the module's docstring); every other request passes on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if path not in (HEALTH_PATH, READY_PATH):
            return self.get_response(request)
        response: HttpResponse
        if request.method not in ("GET", "HEAD"):
            response = JsonResponse({"detail": "GET or HEAD only"}, status=405)
            response["Allow"] = "GET, HEAD"
        elif path == HEALTH_PATH:
            health: Health = {"status": "ok"}
            response = JsonResponse(health)
        else:
            status, body = readiness()
            response = JsonResponse(body, status=status)
            # Not an error line per probe (every few seconds through an outage): the outage
            # is logged once by issuance.availability, the reason is in the answer. (The
            # flag django.utils.log.log_response honours, as console.unavailable sets it.)
            response._has_been_logged = True  # type: ignore[attr-defined]
        add_never_cache_headers(response)
        return response
