"""Pure helpers: problem reasons, chain matching, ARI ids, key authorizations."""

from __future__ import annotations

import base64
import hashlib

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from josepy.jwk import JWKEC

from issuance.acme.issuer import split_problem
from issuance.acme.protocol.certs import ari_cert_id, chain_matches, parse_renewal_info
from issuance.acme.protocol.client import AcmeClient
from issuance.acme.protocol.errors import AcmeProblemError, problem_reason, problem_type
from issuance.pki.x509 import load_leaf
from tests.acme.pki import make_chain


def test_problem_types_and_reasons() -> None:
    assert problem_type("rateLimited") == "urn:ietf:params:acme:error:rateLimited"
    assert problem_type("urn:ietf:params:acme:error:dns") == "urn:ietf:params:acme:error:dns"
    reason = problem_reason("unauthorized", "token mismatch")
    assert reason == "urn:ietf:params:acme:error:unauthorized: token mismatch"
    assert split_problem(reason, "errored") == (
        "urn:ietf:params:acme:error:unauthorized",
        "token mismatch",
    )
    assert split_problem("no solver for x", "errored") == ("errored", "no solver for x")
    exc = AcmeProblemError("malformed", "bad", 400)
    assert exc.short_type == "malformed"
    assert str(exc) == "urn:ietf:params:acme:error:malformed: bad (HTTP 400)"


def test_chain_matches_top_issuer_or_subject() -> None:
    chain = make_chain("leaf.example", "Inter X", "Root X")
    assert chain_matches(chain, "Root X")
    assert chain_matches(chain, "Inter X")  # the top certificate itself
    assert not chain_matches(chain, "Root Y")
    assert not chain_matches("", "Root X")


def test_ari_cert_id_is_aki_dot_serial() -> None:
    chain = make_chain("leaf.example", "I", "R")
    cert = load_leaf(chain)
    aki = cert.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    left, right = ari_cert_id(chain).split(".")
    assert base64.urlsafe_b64decode(left + "=" * (-len(left) % 4)) == aki.key_identifier
    serial = int.from_bytes(base64.urlsafe_b64decode(right + "=" * (-len(right) % 4)), "big")
    assert serial == cert.serial_number


def test_parse_renewal_info_rejects_bad_windows() -> None:
    ok = {"suggestedWindow": {"start": "2030-01-01T00:00:00Z", "end": "2030-01-02T00:00:00Z"}}
    assert parse_renewal_info(ok) is not None
    backwards = {
        "suggestedWindow": {"start": "2030-01-02T00:00:00Z", "end": "2030-01-01T00:00:00Z"}
    }
    assert parse_renewal_info(backwards) is None
    assert parse_renewal_info({}) is None


def test_key_authorization_and_dns01_value() -> None:
    key = JWKEC(key=ec.generate_private_key(ec.SECP256R1()))
    client = AcmeClient("http://127.0.0.1:9/dir", key)
    thumb = base64.urlsafe_b64encode(key.thumbprint()).rstrip(b"=").decode()
    assert client.key_authorization("tok") == f"tok.{thumb}"
    digest = hashlib.sha256(f"tok.{thumb}".encode()).digest()
    assert client.dns01_txt_value("tok") == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_ca_bundle_is_written_to_a_private_directory() -> None:
    import os
    import stat
    from pathlib import Path

    import pytest

    from issuance.acme.protocol.client import TLSOptions
    from tests.acme.pki import make_chain

    pem = make_chain("a.example", "I", "R")
    bundle = base64.b64encode(pem.encode()).decode()
    path = TLSOptions(ca_bundle_b64=bundle).verify()
    assert isinstance(path, str)
    assert Path(path).read_text() == pem
    mode = os.stat(Path(path).parent).st_mode
    assert stat.S_IMODE(mode) == 0o700
    assert TLSOptions(ca_bundle_b64=bundle).verify() == path
    assert TLSOptions(ca_bundle_b64=bundle, skip_verify=True).verify() is False
    assert TLSOptions().verify() is True
    with pytest.raises(AcmeProblemError, match="no PEM certificate"):
        TLSOptions(ca_bundle_b64=base64.b64encode(b"nope").decode()).verify()
