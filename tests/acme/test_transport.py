"""The direct urllib3 transport raises what requests would, so the client's handling holds."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from issuance.acme.transport import DirectTransport
from tests.e2e.servers import free_port


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(201)
        self.send_header("Replay-Nonce", "abc")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"got": "' + body + b'"}')

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_answers_as_a_requests_response(server: str) -> None:
    response = DirectTransport(True, 2).request(
        "POST",
        server + "/x",
        headers={"Content-Type": "application/jose+json"},
        timeout=(5, 5),
        data="hi",
    )
    assert response.status_code == 201
    assert response.headers["replay-nonce"] == "abc"  # case-insensitive, as requests
    assert response.json() == {"got": "hi"}


def test_refused_and_silent_servers_raise_requests_errors() -> None:
    transport = DirectTransport(True, 2)
    with pytest.raises(requests.ConnectionError):
        transport.request("POST", f"http://127.0.0.1:{free_port()}/", headers={}, timeout=(2, 2))
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts the connection, never answers
    try:
        with pytest.raises(requests.ReadTimeout):
            url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
            transport.request("POST", url, headers={}, timeout=(2, 0.3), data="x")
    finally:
        silent.close()
