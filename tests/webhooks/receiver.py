"""A real HTTP receiver for webhook tests: http.server on a free loopback port, answering
each POST as scripted ("ok" → 200, a number → that status, "hang" → no answer until the
test ends), and keeping every request it got."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    script: list[str]
    received: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)


@contextmanager
def receiver(*script: str) -> Iterator[Receiver]:
    """Answers beyond the script are 200."""
    state = Receiver(url="", script=list(script))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                state.received.append(Received(self.path, dict(self.headers.items()), body))
                answer = state.script.pop(0) if state.script else "ok"
            if answer == "hang":
                state.release.wait(60)
                return
            code = 200 if answer == "ok" else int(answer)
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
