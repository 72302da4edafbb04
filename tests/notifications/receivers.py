"""Real receivers started by the tests on free loopback ports: an SMTP server (aiosmtpd) and
an HTTP server that records signed JSON POSTs (or answers 500, or hangs)."""

from __future__ import annotations

import email
import email.policy
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


@dataclass
class Mailbox:
    messages: list[EmailMessage] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = email.message_from_bytes(envelope.content, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        return "250 OK"


@contextmanager
def smtp_server() -> Iterator[tuple[Mailbox, int]]:
    box = Mailbox()
    with socket.socket() as probe:  # a free port (aiosmtpd's start-up check needs a real one)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()


@dataclass
class Received:
    body: bytes
    headers: dict[str, str]


@dataclass
class HttpReceiver:
    posts: list[Received] = field(default_factory=list)
    status: int = 200
    hang: threading.Event | None = None  # set → answer; unset → hold the request
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"


@contextmanager
def http_receiver(status: int = 200, hang: bool = False) -> Iterator[HttpReceiver]:
    receiver = HttpReceiver(status=status, hang=threading.Event() if hang else None)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if receiver.hang is not None:
                receiver.hang.wait(60)
            receiver.posts.append(Received(body, dict(self.headers.items())))
            self.send_response(receiver.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        if receiver.hang is not None:
            receiver.hang.set()
        server.shutdown()
        server.server_close()
