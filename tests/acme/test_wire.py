"""What the client puts on the wire: RFC 8555 JWS that josepy/acme verify, nonces used once,
and the proxy path through requests."""

from __future__ import annotations

import base64
import http.client
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from acme.jws import JWS
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from josepy.jwk import JWK, JWKEC, JWKRSA

from issuance.acme.protocol.client import AcmeClient
from issuance.acme.protocol.jws import Signer
from tests.acme.fakeca import FakeCA, Reply, problem

pytestmark = pytest.mark.django_db


def _unb64(value: str) -> bytes:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))


def _keys() -> list[tuple[JWK, str]]:
    return [
        (JWKEC(key=ec.generate_private_key(ec.SECP256R1())), "ES256"),
        (JWKRSA(key=rsa.generate_private_key(public_exponent=65537, key_size=2048)), "RS256"),
    ]


@pytest.mark.parametrize(("key", "alg"), _keys(), ids=["ES256", "RS256"])
def test_signed_jws_verifies_and_has_exactly_the_rfc8555_header(key: JWK, alg: str) -> None:
    signer = Signer(key)
    for payload, kid in [(None, "https://ca/acct/1"), ({"a": [1, "b"]}, None), ({}, "k")]:
        raw = signer.sign("https://ca/x", "bm9uY2U", payload, kid)
        flat = json.loads(raw)
        assert set(flat) == {"protected", "payload", "signature"}
        jws = JWS.json_loads(raw)
        assert jws.verify(key.public_key())
        assert not jws.verify(type(key)(key=_other_key(key)).public_key())
        protected = json.loads(_unb64(flat["protected"]))
        assert protected["alg"] == alg
        assert protected["url"] == "https://ca/x"
        assert protected["nonce"] == "bm9uY2U"
        if kid:
            assert set(protected) == {"alg", "nonce", "url", "kid"}
            assert protected["kid"] == kid
        else:
            assert set(protected) == {"alg", "nonce", "url", "jwk"}
            assert JWK.from_json(protected["jwk"]) == key.public_key()
        # POST-as-GET has an empty payload, not "null" (RFC 8555 §6.3).
        if payload is None:
            assert jws.payload == b""
        else:
            assert json.loads(jws.payload) == payload
    if alg == "ES256":
        # JWS wants r || s (64 bytes), not cryptography's DER encoding.
        assert len(_unb64(json.loads(signer.sign("u", "n", None, "k"))["signature"])) == 64


def _other_key(key: JWK) -> Any:
    if isinstance(key, JWKEC):
        return ec.generate_private_key(ec.SECP256R1())
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def test_thumbprint_matches_josepy() -> None:
    key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
    expected = base64.urlsafe_b64encode(key.thumbprint()).rstrip(b"=").decode()
    assert Signer(key).thumbprint == expected


@pytest.mark.parametrize(("key", "alg"), _keys(), ids=["ES256", "RS256"])
def test_every_request_on_the_wire_verifies_and_uses_each_nonce_once(
    ca: FakeCA, key: JWK, alg: str
) -> None:
    client = AcmeClient(ca.directory_url, key)
    client.new_account("ops@example.test")
    ca.on(
        "/new-order",
        problem(400, "badNonce", "stale"),
        Reply(201, {"status": "pending"}, {"Location": f"{ca.base}/order/1"}),
    )
    client.new_order([("dns", "a.example.com")])
    ca.on("/order/1", Reply(200, {"status": "valid"}))
    client.get_order(f"{ca.base}/order/1")
    ca.on("/chal/1", Reply(200, {"status": "processing"}))
    client.answer_challenge(f"{ca.base}/chal/1")

    assert [path for path, _ in ca.posts] == [
        "/acct",
        "/new-order",
        "/new-order",
        "/order/1",
        "/chal/1",
    ]
    nonces = []
    for path, raw in ca.posts:
        jws = JWS.json_loads(raw)
        assert jws.verify(key.public_key()), path
        protected = json.loads(_unb64(json.loads(raw)["protected"]))
        assert protected["alg"] == alg
        assert protected["url"] == ca.base + path
        if path == "/acct":
            assert set(protected) == {"alg", "nonce", "url", "jwk"}
        else:
            assert set(protected) == {"alg", "nonce", "url", "kid"}
            assert protected["kid"] == f"{ca.base}/acct/1"
        nonces.append(protected["nonce"])
    assert set(nonces) <= ca.nonces, "a nonce the CA never issued was sent"
    assert len(set(nonces)) == len(nonces), "a nonce was used twice (badNonce retry included)"
    assert ca.payloads["/order/1"] is None  # POST-as-GET
    assert ca.payloads["/chal/1"] == {}  # the challenge answer is an empty object
    assert ca.hits["/nonce"] == 1, "the answers' Replay-Nonce headers feed the next requests"


def test_a_malformed_replay_nonce_is_not_sent_back(ca: FakeCA) -> None:
    client = AcmeClient(
        ca.directory_url, JWKEC(key=ec.generate_private_key(ec.SECP256R1())), f"{ca.base}/acct/1"
    )
    ca.on("/order/1", Reply(200, {"status": "valid"}, {"Replay-Nonce": "not base64url!"}))
    ca.on("/order/2", Reply(200, {"status": "valid"}))
    client.get_order(f"{ca.base}/order/1")
    client.get_order(f"{ca.base}/order/2")
    assert ca.hits["/nonce"] == 2  # the malformed one was dropped, a fresh one fetched
    assert ca.protected["/order/2"]["nonce"] in ca.nonces


class _ForwardProxy(BaseHTTPRequestHandler):
    """A plain-HTTP forward proxy: requests sends it absolute URLs."""

    seen: list[tuple[str, str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        type(self).seen.append((self.command, self.path))
        _, _, host, path = self.path.split("/", 3)
        target = http.client.HTTPConnection(host, timeout=10)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() != "proxy-connection"}
        target.request(self.command, "/" + path, body=body, headers=headers)
        answer = target.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for name, value in answer.getheaders():
            if name.lower() not in {"content-length", "connection", "transfer-encoding"}:
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        target.close()

    do_GET = do_POST = do_HEAD = _forward


def test_with_a_proxy_configured_every_request_goes_through_it(
    ca: FakeCA, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _ForwardProxy)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    _ForwardProxy.seen = []
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
    try:
        key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
        client = AcmeClient(ca.directory_url, key, f"{ca.base}/acct/1")
        ca.on("/new-order", Reply(201, {"status": "pending"}, {"Location": f"{ca.base}/o/1"}))
        assert client.new_order([("dns", "a.example.com")])["url"] == f"{ca.base}/o/1"
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert _ForwardProxy.seen == [
        ("GET", f"{ca.base}/dir"),
        ("HEAD", f"{ca.base}/nonce"),
        ("POST", f"{ca.base}/new-order"),
    ]
    assert JWS.json_loads(ca.posts[-1][1]).verify(key.public_key())
