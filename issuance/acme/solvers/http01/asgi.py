"""HTTP-01 answers at the ASGI layer, in front of Django (console.asgi).

A CA fetches every token several times (Pebble three times, from its "perspectives"), and
the self-check once more. Through Django each fetch cost a new thread (ASGI runs every
sync request in a fresh one), a request object and the middleware adapters: about a
third of the web process's CPU during bulk issuance. Here the answer is one indexed
lookup on a small pool of long-lived threads. Same answers as AcmeChallengeMiddleware
(which still serves the path under WSGI and in Django's test client): any Host, GET and
HEAD only, text/plain, never cached, 404 for unknown tokens.

The fetches of one token arrive together, so they share one lookup: a fetch that comes
while a lookup for its token is running waits for that lookup instead of starting one
(no thread hop, no query). Nothing outlives the lookup, so a token stops answering as soon
as its row says so. While the database cannot be reached, tokens answered lately come from
memory (issuance.acme.solvers.http01.solver) and others get a 503.

Measured (docs/decisions/0004-bypasses.md): answering HTTP-01 from Django's middleware costs
the web process 1.2 ms more per certificate, 23 % of its CPU. It becomes unnecessary
together with console/asgi_http.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.db import close_old_connections

from issuance.acme.solvers.http01.solver import PATH_PREFIX, TOKEN_RE, key_authorization_for
from issuance.availability import DatabaseUnavailable

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[Any]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Any, Any], Awaitable[None]]

# Django's add_never_cache_headers, minus the Expires date (Cache-Control wins over it).
NEVER_CACHE = b"max-age=0, no-cache, no-store, must-revalidate, private"
LOOKUP_THREADS = 4


def _lookup(token: str) -> str | None:
    try:
        return key_authorization_for(token)
    finally:
        close_old_connections()  # back to the pool (or closed, without one)


class AcmeChallengeApp:
    """Answer /.well-known/acme-challenge/<token> here; pass everything else to `app`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._executor = ThreadPoolExecutor(LOOKUP_THREADS, thread_name_prefix="http01")
        self._running: dict[str, asyncio.Future[str | None]] = {}

    async def key_for(self, token: str) -> str | None:
        """The key authorization for `token`, from the lookup already running for it if any.

        The fetches waiting on a lookup share its outcome, an error included (they would
        meet the same database).
        """
        if not TOKEN_RE.match(token):
            return None
        lookup = self._running.get(token)
        if lookup is None or lookup.done():
            lookup = asyncio.get_running_loop().run_in_executor(self._executor, _lookup, token)
            self._running[token] = lookup
            lookup.add_done_callback(lambda done: self._forget(token, done))
        # A fetch whose client goes away must not cancel the lookup the others wait for.
        return await asyncio.shield(lookup)

    def _forget(self, token: str, lookup: asyncio.Future[str | None]) -> None:
        if self._running.get(token) is lookup:
            del self._running[token]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(PATH_PREFIX):
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "GET")
        extra: list[tuple[bytes, bytes]] = []
        if method not in ("GET", "HEAD"):
            status, body = 405, b""
            extra.append((b"allow", b"GET, HEAD"))
        else:
            try:
                key = await self.key_for(path.removeprefix(PATH_PREFIX))
            except DatabaseUnavailable:
                status, body = 503, b"database unavailable\n"
                extra.append((b"retry-after", b"5"))
            else:
                status, body = (404, b"not found\n") if key is None else (200, key.encode())
        headers = [
            (b"content-type", b"text/plain; charset=utf-8"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", NEVER_CACHE),
            *extra,
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})
