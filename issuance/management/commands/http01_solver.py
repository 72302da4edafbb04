"""`manage.py http01_solver --port 8089`: answer HTTP-01 tokens, nothing else.

For deployments where the console is not public: put this behind the reverse proxy that
owns port 80 (`location /.well-known/acme-challenge/ { proxy_pass http://127.0.0.1:8089; }`).
A threaded server with a large listen backlog, because a CA's validation authority fetches
each token from several perspectives at once. SIGTERM / SIGINT stop it.
"""

from __future__ import annotations

import logging
import signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections, connection

from issuance.acme.solvers.http01.solver import PATH_PREFIX, key_authorization_for
from issuance.availability import DatabaseUnavailable

log = logging.getLogger("issuance.http01_solver")


class SolverHandler(BaseHTTPRequestHandler):
    server_version = "issuance-http01"
    sys_version = ""
    protocol_version = "HTTP/1.0"

    def _answer(self, with_body: bool) -> None:
        path = self.path.split("?", 1)[0]
        key: str | None = None
        unavailable = False
        if path.startswith(PATH_PREFIX):
            try:
                key = key_authorization_for(path.removeprefix(PATH_PREFIX))
            except DatabaseUnavailable:
                unavailable = True  # and not in the memory of recent answers
            finally:
                # Each request runs on its own thread, which owns its own connection.
                connection.close()
        if unavailable:
            status, body = 503, b"database unavailable\n"
        else:
            status = 200 if key is not None else 404
            body = (key if key is not None else "not found\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        if unavailable:
            self.send_header("Retry-After", "5")
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def do_GET(self) -> None:
        self._answer(with_body=True)

    def do_HEAD(self) -> None:
        self._answer(with_body=False)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class SolverServer(ThreadingHTTPServer):
    daemon_threads = True
    # Pebble's (and Let's Encrypt's) VA opens several connections per token at once.
    request_queue_size = 1024


def make_server(host: str, port: int) -> SolverServer:
    return SolverServer((host, port), SolverHandler)


class Command(BaseCommand):
    help = "Serve only /.well-known/acme-challenge/<token> (HTTP-01 answers) on a port."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8089)
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on")

    def handle(self, *args: Any, **options: Any) -> None:
        close_old_connections()
        server = make_server(options["host"], options["port"])
        stopping = threading.Event()

        def stop(signum: int, frame: FrameType | None) -> None:
            if not stopping.is_set():
                stopping.set()
                # shutdown() waits for serve_forever to return: not from this thread.
                threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        host, port = server.server_address[:2]
        self.stdout.write(f"HTTP-01 solver listening on http://{host!s}:{port}{PATH_PREFIX}")
        self.stdout.flush()
        try:
            server.serve_forever(poll_interval=0.5)
        finally:
            server.server_close()
        self.stdout.write("HTTP-01 solver stopped")
