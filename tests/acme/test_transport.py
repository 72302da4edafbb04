"""The direct urllib3 transport raises what requests would, so the client's handling holds."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from issuance.acme.protocol import transport as acme_transport
from issuance.acme.protocol.transport import DirectTransport
from tests.e2e.servers import free_port


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse is visible
    peers: list[tuple[str, int]] = []

    def do_POST(self) -> None:
        type(self).peers.append(self.client_address)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        data = (
            b'{"got": "' + body + b'", "path": "' + self.path.encode() + b'", '
            b'"accept": "' + self.headers["Accept"].encode() + b'"}'
        )
        self.send_response(201)
        self.send_header("Replay-Nonce", "abc")
        self.send_header("Link", '<https://ca/a>;rel="alternate"')
        self.send_header("Link", '<https://ca/b>;rel="up"')
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def _serve() -> ThreadingHTTPServer:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.fixture
def server() -> Iterator[str]:
    httpd = _serve()
    _Handler.peers = []
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_answers_as_a_requests_response(server: str) -> None:
    response = DirectTransport(True, 2).request(
        "POST",
        server + "/x?y=1",
        headers={"Content-Type": "application/jose+json"},
        timeout=(5, 5),
        data="hi",
    )
    assert response.status_code == 201
    assert response.headers["replay-nonce"] == "abc"  # case-insensitive, as requests
    # Repeated headers joined as requests joins them (Link: alternate chains, up).
    assert response.headers["Link"] == '<https://ca/a>;rel="alternate", <https://ca/b>;rel="up"'
    assert response.json() == {"got": "hi", "path": "/x?y=1", "accept": "*/*"}
    assert response.url == server + "/x?y=1"


def test_one_kept_pool_per_origin_reuses_its_connection(server: str) -> None:
    transport = DirectTransport(True, 2)
    for _ in range(5):
        response = transport.request(
            "POST", server + "/a", headers={"Accept": "application/json"}, timeout=(5, 5), data="x"
        )
        assert response.json()["accept"] == "application/json"
    assert len(_Handler.peers) == 5
    assert len(set(_Handler.peers)) == 1, "each request opened a new connection"
    assert list(transport._pools) == [server]


def test_pools_for_at_most_a_few_origins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acme_transport, "MAX_ORIGINS", 2)
    servers = [_serve() for _ in range(3)]
    try:
        transport = DirectTransport(True, 2)
        origins = [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
        for origin in origins:
            transport.request("POST", origin + "/", headers={}, timeout=(5, 5), data="x")
        assert list(transport._pools) == origins[1:]
    finally:
        for httpd in servers:
            httpd.shutdown()
            httpd.server_close()


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
