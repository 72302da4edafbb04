"""Plain HTTP under ASGI: Django's whole request on one of a few long-lived threads.

Django's ASGIHandler runs the middleware in async mode. None of this project's middleware
or views is async, so every request paid for a new thread (ThreadSensitiveContext), a
sync/async switch around each sync-only middleware (AcmeChallengeMiddleware, WhiteNoise)
and one around each process_request/process_response of the others, then the view in a
thread again: during bulk issuance that machinery cost more CPU than the REST views it
served (py-spy: 2/3 of a certificate create outside the view). Here the body is read and
the response sent on the event loop, and everything in between (request_started, the
middleware chain in sync mode, the view, request_finished) runs on one pool thread, as
under a threaded WSGI server. Responses are the same: this is ASGIHandler with its
middleware loaded for sync and get_response() called on the thread.

WebSockets never come here (console.asgi routes them to Channels), and HTTP-01 tokens are
answered in front of this (issuance.acme.solvers.http01.asgi).

Measured (docs/decisions/0004-bypasses.md): Django's ASGIHandler for plain HTTP costs the
web process 6.3 ms more per certificate, more than doubling its CPU (5.3 ms). It becomes
unnecessary if Django runs sync middleware under ASGI without a thread hop per call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers import base
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.http import FileResponse, HttpResponseBase
from django.urls import set_script_prefix

Scope = dict[str, Any]
_END: Any = object()  # next()'s default once the iterator is done


class ThreadedASGIHandler(ASGIHandler):
    """Django for ASGI HTTP scopes, each request run whole on one thread of a fixed pool.

    `threads` bounds how many requests run Django code at once (the rest wait on the event
    loop, not in the kernel's accept queue): with the database pool's 20 connections, more
    would only wait for a connection inside the thread.
    """

    def __init__(self, threads: int) -> None:
        base.BaseHandler.__init__(self)  # ASGIHandler.__init__ loads middleware for async
        self.load_middleware(is_async=False)
        self._executor = ThreadPoolExecutor(threads, thread_name_prefix="django-http")

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        loop = asyncio.get_running_loop()
        try:
            response = await loop.run_in_executor(self._executor, self._respond, scope, body_file)
            if not response.streaming:
                await self.send_response(response, send)
                return
            try:
                await self._send_streaming(response, send)
            finally:
                await loop.run_in_executor(self._executor, response.close)
        finally:
            body_file.close()

    def _respond(self, scope: Scope, body_file: Any) -> HttpResponseBase:
        """One request, start to finish, on this thread (its DB connection included)."""
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, response = self.create_request(scope, body_file)
        if request is not None:
            response = self.get_response(request)
            response._handler_class = self.__class__  # type: ignore[attr-defined]
            if isinstance(response, FileResponse):
                response.block_size = self.chunk_size
        assert response is not None
        if not response.streaming:
            # request_finished (which hands the DB connection back) on the thread that used
            # it, before the bytes go out; the content stays readable after close().
            response.close()
        return response

    async def _send_streaming(self, response: Any, send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": response.status_code,
                "headers": _headers(response),
            }
        )
        if response.is_async:
            async for part in response.streaming_content:
                await self._send_chunks(part, send)
        else:
            # Sync iterators (WhiteNoise's files) are read on the pool, a chunk at a time.
            loop = asyncio.get_running_loop()
            parts: Iterator[bytes] = iter(response.streaming_content)
            while True:
                part = await loop.run_in_executor(self._executor, next, parts, _END)
                if part is _END:
                    break
                await self._send_chunks(part, send)
        await send({"type": "http.response.body"})

    async def _send_chunks(self, part: bytes, send: Any) -> None:
        for chunk, _ in self.chunk_bytes(part):
            await send({"type": "http.response.body", "body": chunk, "more_body": True})


def _headers(response: HttpResponseBase) -> list[tuple[bytes, bytes]]:
    """As ASGIHandler.send_response encodes them (header case kept, cookies added)."""
    headers = []
    for header, value in response.items():
        name = header.encode("ascii") if isinstance(header, str) else bytes(header)
        raw = value.encode("latin1") if isinstance(value, str) else bytes(value)
        headers.append((name, raw))
    for cookie in response.cookies.values():
        headers.append((b"Set-Cookie", cookie.output(header="").encode("ascii").strip()))
    return headers
