"""AcmeClient error handling against a scripted ACME server: badNonce, pauses, 5xx, timeouts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from django.utils import timezone
from josepy.jwk import JWKEC

from issuance.acme import ratelimit
from issuance.acme.protocol import client as acme_client
from issuance.acme.protocol import exchange as acme_exchange
from issuance.acme.protocol.certs import ari_cert_id
from issuance.acme.protocol.client import AcmeClient
from issuance.acme.protocol.errors import AcmePausedError, AcmeProblemError, AcmeTemporaryError
from issuance.acme.record import DATABASE_RECORD
from issuance.controllers.base import PermanentError, TemporaryError
from issuance.models import AcmeServer
from tests.acme.fakeca import FakeCA, Reply, problem

pytestmark = pytest.mark.django_db


def make_client(ca: FakeCA) -> AcmeClient:
    key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
    return AcmeClient(
        ca.directory_url, key, account_uri=f"{ca.base}/acct/1", record=DATABASE_RECORD
    )


ORDER = Reply(
    201,
    {"status": "pending", "authorizations": [], "finalize": "http://x/finalize"},
    {"Location": "http://x/order/1"},
)


def test_bad_nonce_is_retried_with_a_fresh_nonce(ca: FakeCA) -> None:
    from issuance.observability.metrics import REGISTRY

    def metric(result: str) -> float:
        labels = {"action": "new_order", "result": result}
        return REGISTRY.get_sample_value("issuance_acme_requests_total", labels) or 0.0

    client = make_client(ca)
    before = acme_exchange.stats().get("bad_nonce", 0)
    metric_before = (metric("bad_nonce"), metric("ok"))
    ca.on("/new-order", problem(400, "badNonce", "stale"), problem(400, "badNonce", "stale"), ORDER)
    order = client.new_order([("dns", "a.example.com")])
    assert (metric("bad_nonce"), metric("ok")) == (metric_before[0] + 2, metric_before[1] + 1)
    assert order["url"] == "http://x/order/1"
    assert order["status"] == "pending"
    assert ca.hits["/new-order"] == 3
    assert acme_exchange.stats()["bad_nonce"] - before == 2


def test_bad_nonce_gives_up_after_a_few_retries(ca: FakeCA) -> None:
    client = make_client(ca)
    ca.on("/new-order", *[problem(400, "badNonce", "stale")] * 10)
    with pytest.raises(AcmeTemporaryError, match="badNonce"):
        client.new_order([("dns", "a.example.com")])
    assert ca.hits["/new-order"] == acme_exchange.BAD_NONCE_RETRIES + 1


def test_problem_document_becomes_permanent_error_with_type_detail_status(ca: FakeCA) -> None:
    client = make_client(ca)
    ca.on("/new-order", problem(403, "unauthorized", "no, not for you"))
    with pytest.raises(AcmeProblemError) as info:
        client.new_order([("dns", "a.example.com")])
    exc = info.value
    assert isinstance(exc, PermanentError)
    assert exc.type == "urn:ietf:params:acme:error:unauthorized"
    assert exc.detail == "no, not for you"
    assert exc.status == 403


def test_rate_limit_pauses_the_whole_ca_and_no_call_is_made_while_paused(ca: FakeCA) -> None:
    first = make_client(ca)
    other_issuer = make_client(ca)  # another account at the same CA
    ca.on(
        "/new-order",
        problem(429, "rateLimited", "too many new orders", **{"Retry-After": "120"}),
    )
    with pytest.raises(TemporaryError) as info:
        first.new_order([("dns", "a.example.com")])
    assert info.value.delay is not None
    assert timedelta(seconds=110) < info.value.delay <= timedelta(seconds=121)
    row = AcmeServer.objects.get(directory_url=ca.directory_url)
    assert row.paused_until is not None
    assert row.paused_until > timezone.now() + timedelta(seconds=110)
    assert "rateLimited" in row.pause_reason

    hits_before = sum(ca.hits.values())
    for client in (first, other_issuer):
        with pytest.raises(AcmePausedError) as paused:
            client.get_order(f"{ca.base}/order/1")
        assert paused.value.delay is not None
        assert paused.value.delay > timedelta(seconds=100)
    # Another process reading the row (no cached view) is paused too.
    ratelimit.forget_cache()
    with pytest.raises(AcmePausedError):
        make_client(ca).get_order(f"{ca.base}/order/1")
    assert sum(ca.hits.values()) == hits_before, "calls were made while the CA was paused"

    ratelimit.clear_pause(ca.directory_url)
    ca.on("/order/1", Reply(200, {"status": "pending"}))
    assert first.get_order(f"{ca.base}/order/1")["status"] == "pending"


def test_http_date_retry_after_on_503_pauses(ca: FakeCA) -> None:
    client = make_client(ca)
    when = timezone.now() + timedelta(minutes=10)
    ca.on(
        "/order/2",
        Reply(503, "maintenance", {"Retry-After": when.strftime("%a, %d %b %Y %H:%M:%S GMT")}),
    )
    with pytest.raises(TemporaryError):
        client.get_order(f"{ca.base}/order/2")
    paused = ratelimit.paused_until(ca.directory_url)
    assert paused is not None
    assert abs((paused - when).total_seconds()) < 5


def test_5xx_without_retry_after_is_temporary_and_does_not_pause(ca: FakeCA) -> None:
    client = make_client(ca)
    ca.on("/order/3", Reply(500, {"type": "urn:ietf:params:acme:error:serverInternal"}))
    with pytest.raises(AcmeTemporaryError) as info:
        client.get_order(f"{ca.base}/order/3")
    assert info.value.delay is None  # the worker's ACME backoff (5 s → 30 min) applies
    assert ratelimit.paused_until(ca.directory_url) is None


def test_a_hanging_request_times_out_once_and_is_not_repeated(
    ca: FakeCA, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repeating it would hold the thread twice as long against a CA that froze; the CA is
    recorded unreachable instead (tests/acme/test_health.py)."""
    monkeypatch.setattr(acme_client, "READ_TIMEOUT", 0.3)
    client = make_client(ca)
    ca.on("/order/4", Reply(200, {"status": "ready"}, delay=1.0), Reply(200, {"status": "ready"}))
    with pytest.raises(AcmeTemporaryError, match="no answer within"):
        client.get_order(f"{ca.base}/order/4")
    assert ca.hits["/order/4"] == 1


def test_new_order_is_not_repeated_after_a_read_timeout(
    ca: FakeCA, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A repeat could create a second order; the orders controller recovers instead."""
    monkeypatch.setattr(acme_client, "READ_TIMEOUT", 0.3)
    client = make_client(ca)
    ca.on("/new-order", Reply(201, ORDER.body, ORDER.headers, delay=1.0), ORDER)
    with pytest.raises(AcmeTemporaryError):
        client.new_order([("dns", "a.example.com")])
    assert ca.hits["/new-order"] == 1


def test_unreachable_ca_is_temporary() -> None:
    from tests.e2e.servers import free_port

    key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
    client = AcmeClient(f"http://127.0.0.1:{free_port()}/dir", key, record=DATABASE_RECORD)
    with pytest.raises(AcmeTemporaryError):
        client.directory()


def test_renewal_info_window(ca: FakeCA) -> None:
    from tests.acme.pki import make_chain

    chain = make_chain("leaf.example.com", "Test Intermediate", "Test Root")
    client = make_client(ca)
    ca.default["/ari"] = Reply(
        200,
        {
            "suggestedWindow": {
                "start": "2030-01-02T00:00:00Z",
                "end": "2030-01-03T00:00:00Z",
            }
        },
    )
    window = client.renewal_info(chain)
    assert window is not None
    start, end = window
    assert start.isoformat() == "2030-01-02T00:00:00+00:00"
    assert end - start == timedelta(days=1)
    [path] = [p for p in ca.hits if p.startswith("/ari/")]
    assert path == "/ari/" + ari_cert_id(chain)


def test_renewal_info_absent_when_directory_has_none(ca: FakeCA) -> None:
    del ca.directory["renewalInfo"]
    from tests.acme.pki import make_chain

    assert make_client(ca).renewal_info(make_chain("a.example", "I", "R")) is None


def test_preferred_chain_follows_alternate_links(ca: FakeCA) -> None:
    from tests.acme.pki import make_chain

    default = make_chain("leaf.example.com", "Inter A", "Root A")
    alternate = make_chain("leaf.example.com", "Inter B", "Root B")
    link = f'<{ca.base}/cert/1/alt>;rel="alternate"'
    ca.default["/cert/1"] = Reply(200, default, {"Link": link})
    ca.default["/cert/1/alt"] = Reply(200, alternate)
    client = make_client(ca)
    assert client.download_certificate(f"{ca.base}/cert/1") == default
    assert client.download_certificate(f"{ca.base}/cert/1", "Root B") == alternate
    assert client.download_certificate(f"{ca.base}/cert/1", "Root A") == default
    # No chain matches: the default one, as cert-manager does.
    assert client.download_certificate(f"{ca.base}/cert/1", "Root C") == default


def test_new_order_payload_carries_identifiers_and_profile(ca: FakeCA) -> None:
    client = make_client(ca)
    ca.on("/new-order", ORDER, ORDER)
    client.new_order([("dns", "a.example.com"), ("ip", "192.0.2.1")], profile="shortlived")
    assert ca.payloads["/new-order"] == {
        "identifiers": [
            {"type": "dns", "value": "a.example.com"},
            {"type": "ip", "value": "192.0.2.1"},
        ],
        "profile": "shortlived",
    }
    protected = ca.protected["/new-order"]
    assert protected["alg"] == "ES256"
    assert protected["kid"] == f"{ca.base}/acct/1"
    assert protected["url"] == f"{ca.base}/new-order"
    client.new_order([("dns", "a.example.com")])
    assert "profile" not in ca.payloads["/new-order"]


def test_new_account_with_eab_is_signed_with_the_jwk_and_binds_the_key(ca: FakeCA) -> None:
    import base64
    import hmac
    import json

    key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
    client = AcmeClient(ca.directory_url, key)
    hmac_key = base64.urlsafe_b64encode(b"k" * 32).rstrip(b"=").decode()
    account = client.new_account("ops@example.test", eab=("kid-1", hmac_key, "HS256"))
    assert account["url"] == f"{ca.base}/acct/1"
    protected = ca.protected["/acct"]
    assert "jwk" in protected
    assert "kid" not in protected
    payload = ca.payloads["/acct"]
    assert payload["contact"] == ["mailto:ops@example.test"]
    assert payload["termsOfServiceAgreed"] is True
    eab = payload["externalAccountBinding"]
    eab_protected = json.loads(base64.urlsafe_b64decode(eab["protected"] + "=="))
    assert eab_protected == {"alg": "HS256", "kid": "kid-1", "url": f"{ca.base}/acct"}
    bound = json.loads(base64.urlsafe_b64decode(eab["payload"] + "=="))
    assert bound == key.public_key().to_partial_json()
    signing_input = f"{eab['protected']}.{eab['payload']}".encode()
    expected = hmac.new(b"k" * 32, signing_input, "sha256").digest()
    assert base64.urlsafe_b64decode(eab["signature"] + "==") == expected
    # Later requests use the account URL as kid.
    ca.on("/order/7", Reply(200, {"status": "valid"}))
    client.get_order(f"{ca.base}/order/7")
    assert ca.protected["/order/7"]["kid"] == f"{ca.base}/acct/1"
    assert ca.payloads["/order/7"] is None  # POST-as-GET


def test_finalize_sends_the_csr_der(ca: FakeCA) -> None:
    import base64

    from cryptography import x509 as cx509
    from cryptography.hazmat.primitives import serialization

    from issuance.pki.csr import build_csr
    from issuance.pki.keys import generate_private_key

    csr_pem = build_csr(generate_private_key({"algorithm": "ECDSA"}), {"dnsNames": ["a.test"]})
    client = make_client(ca)
    ca.on("/finalize/1", Reply(200, {"status": "processing"}))
    assert client.finalize(f"{ca.base}/finalize/1", csr_pem)["status"] == "processing"
    der = base64.urlsafe_b64decode(ca.payloads["/finalize/1"]["csr"] + "==")
    expected = cx509.load_pem_x509_csr(csr_pem.encode()).public_bytes(serialization.Encoding.DER)
    assert der == expected
