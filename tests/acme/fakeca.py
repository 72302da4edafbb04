"""A tiny scripted ACME server (plain HTTP, in a thread) for client error-handling tests.

It serves a directory and nonces, and answers each path from a script of canned responses,
counting every hit. It keeps every POSTed JWS and every nonce it issued, so tests can
verify the signatures, headers and nonce use (tests/acme/test_wire.py). Real Pebble covers the happy paths; this
covers what Pebble cannot be made to do on demand (429 + Retry-After, 503, hangs).
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict -> JSON, str -> text
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


def problem(status: int, type_: str, detail: str, **headers: str) -> Reply:
    return Reply(
        status,
        {"type": f"urn:ietf:params:acme:error:{type_}", "detail": detail, "status": status},
        {"Content-Type": "application/problem+json", **headers},
    )


def _unb64(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


class FakeCA:
    def __init__(self, port: int = 0) -> None:
        self.hits: Counter[str] = Counter()
        # Decoded JWS payloads and protected headers of POSTs, per path (last one wins).
        self.payloads: dict[str, Any] = {}
        self.protected: dict[str, dict[str, Any]] = {}
        # Every POSTed body (path, raw JWS) in order, and every nonce handed out.
        self.posts: list[tuple[str, bytes]] = []
        # Every decoded POST payload (path, payload) in order, e.g. each newOrder's.
        self.posted: list[tuple[str, Any]] = []
        self.nonces: set[str] = set()
        self.script: dict[str, list[Reply]] = {}
        self.default: dict[str, Reply] = {}
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.directory = {
            "newNonce": f"{self.base}/nonce",
            "newAccount": f"{self.base}/acct",
            "newOrder": f"{self.base}/new-order",
            "renewalInfo": f"{self.base}/ari",
        }
        self.default["/acct"] = Reply(201, {"status": "valid"}, {"Location": f"{self.base}/acct/1"})
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def directory_url(self) -> str:
        return f"{self.base}/dir"

    def on(self, path: str, *replies: Reply) -> None:
        """Answer the next requests to `path` with `replies`, in order."""
        self.script.setdefault(path, []).extend(replies)

    def renewal_window(self, start: str, end: str, retry_after: str | None = None) -> None:
        """Serve this ARI window (RFC 9773) for every certificate from now on; call again to
        move it mid-test. `retry_after` goes into the Retry-After header."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        self.default["/ari"] = Reply(
            200, {"suggestedWindow": {"start": start, "end": end}}, headers
        )

    def payloads_of(self, path: str) -> list[Any]:
        """The decoded payloads POSTed to `path`, in order."""
        return [payload for p, payload in self.posted if p == path]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def nonce(self) -> str:
        value = secrets.token_urlsafe(16)
        self.nonces.add(value)
        return value

    def _reply_for(self, path: str) -> Reply:
        queue = self.script.get(path)
        if queue:
            return queue.pop(0)
        if path in self.default:
            return self.default[path]
        if path.startswith("/ari/") and "/ari" in self.default:
            return self.default["/ari"]
        return Reply(404, {"type": "urn:ietf:params:acme:error:malformed", "detail": "no route"})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        ca = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, reply: Reply) -> None:
                if reply.delay:
                    time.sleep(reply.delay)
                body = reply.body
                data = (
                    json.dumps(body).encode()
                    if isinstance(body, (dict, list))
                    else (body or "").encode()
                )
                try:
                    self.send_response(reply.status)
                    self.send_header("Replay-Nonce", ca.nonce())
                    ctype = "application/json" if isinstance(body, (dict, list)) else "text/plain"
                    headers = {"Content-Type": ctype, **reply.headers}
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_HEAD(self) -> None:
                ca.hits[self.path] += 1
                self.send_response(200)
                self.send_header("Replay-Nonce", ca.nonce())
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                ca.hits[self.path] += 1
                if self.path == "/dir":
                    self._send(Reply(200, ca.directory))
                else:
                    self._send(ca._reply_for(self.path))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                ca.hits[self.path] += 1
                ca.posts.append((self.path, body))
                try:
                    jws = json.loads(body)
                    ca.protected[self.path] = json.loads(_unb64(jws["protected"]))
                    raw = _unb64(jws["payload"])
                    ca.payloads[self.path] = json.loads(raw) if raw else None
                    ca.posted.append((self.path, ca.payloads[self.path]))
                except (ValueError, KeyError):
                    pass
                self._send(ca._reply_for(self.path))

        return Handler
