"""A tiny scripted ACME server (plain HTTP, in a thread) for client error-handling tests.

It serves a directory and nonces, and answers each path from a script of canned responses,
counting every hit. It keeps every POSTed JWS and every nonce it issued, so tests can
verify the signatures, headers and nonce use (tests/acme/test_wire.py). Real Pebble covers the happy paths; this
covers what Pebble cannot be made to do on demand (429 + Retry-After, 503, hangs).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import secrets
import shutil
import ssl
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


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


def _tls_context() -> tuple[ssl.SSLContext, str]:
    """A server context for 127.0.0.1 signed by a new CA, and that CA as a caBundle."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake ACME CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), True
        )
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    directory = Path(tempfile.mkdtemp(prefix="fakeca-"))
    (directory / "cert.pem").write_bytes(cert.public_bytes(pem))
    (directory / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "cert.pem", directory / "key.pem")
    shutil.rmtree(directory, ignore_errors=True)
    return context, base64.b64encode(ca_cert.public_bytes(pem)).decode()


def _unb64(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


class FakeCA:
    def __init__(self, port: int = 0, *, tls: bool = False) -> None:
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
        # tls: HTTPS with a throw-away CA (ca_bundle_b64), for code that, like the issuer
        # spec, accepts only https directory URLs.
        self.ca_bundle_b64 = ""
        if tls:
            context, self.ca_bundle_b64 = _tls_context()
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.base = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.directory: dict[str, Any] = {
            "newNonce": f"{self.base}/nonce",
            "newAccount": f"{self.base}/acct",
            "newOrder": f"{self.base}/new-order",
            "renewalInfo": f"{self.base}/ari",
        }
        self.default["/acct"] = Reply(201, {"status": "valid"}, {"Location": f"{self.base}/acct/1"})
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def set_meta(self, **meta: Any) -> None:
        """Serve `meta` in the directory (RFC 8555 §7.1.1: termsOfService, website,
        externalAccountRequired; the profiles draft: profiles {name: description})."""
        self.directory["meta"] = meta

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
