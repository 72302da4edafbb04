"""The client against real Pebble over TLS: caBundle, skipTLSVerify, an untrusted CA."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from josepy.jwk import JWKEC

from issuance.acme import ratelimit
from issuance.acme.protocol.client import AcmeClient, TLSOptions
from issuance.acme.protocol.errors import AcmeTemporaryError
from tests.e2e.servers import PebbleServer, pebble_stack

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(120)]


@pytest.fixture
def pebble(tmp_path: Path) -> Iterator[PebbleServer]:
    ratelimit.forget_cache()
    with pebble_stack(tmp_path) as (server, _dns):
        yield server
    ratelimit.forget_cache()


def test_requests_over_tls_with_ca_bundle_and_skip_verify(pebble: PebbleServer) -> None:
    key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
    client = AcmeClient(
        pebble.directory_url, key, "", TLSOptions(ca_bundle_b64=pebble.ca_bundle_b64)
    )
    account = client.new_account("tls@example.test")
    order = client.new_order([("dns", "tls.example.test")])
    assert order["status"] == "pending"
    authz = client.get_authorization(order["authorizations"][0])
    assert authz["identifier"] == {"type": "dns", "value": "tls.example.test"}
    chal = next(c for c in authz["challenges"] if c["type"] == "http-01")
    assert client.get_challenge(chal["url"])["token"] == chal["token"]
    assert client.get_order(order["url"])["url"] == order["url"]

    # skipTLSVerify: the same key finds the same account.
    insecure = AcmeClient(pebble.directory_url, key, "", TLSOptions(skip_verify=True))
    assert insecure.new_account(only_return_existing=True)["url"] == account["url"]
    assert insecure.get_order(order["url"])["status"] == "pending"


def test_an_untrusted_ca_certificate_is_a_temporary_error(pebble: PebbleServer) -> None:
    key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
    client = AcmeClient(pebble.directory_url, key)  # the system bundle: Pebble is unknown
    with pytest.raises(AcmeTemporaryError, match="SSLError"):
        client.directory()  # a GET, through requests
    # The POSTs' own transport verifies too (the directory handed in from elsewhere).
    client._directory = {**pebble.directory(), "url": pebble.directory_url}
    with pytest.raises(AcmeTemporaryError, match="SSLError"):
        client.new_account("tls@example.test")
