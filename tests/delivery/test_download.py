"""Scoped download tokens and /download/<certificate>/<file>: scope, formats, ETag, audit."""

from __future__ import annotations

import base64
import hashlib
import logging
from datetime import timedelta
from typing import Any

import jks
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from django.test import Client

from issuance.access.apitokens import TokenError
from issuance.delivery.downloadtokens import create_download_token, revoke_download_token
from issuance.models import Certificate, DownloadToken, Event, Issuer, Secret
from issuance.operations import actions
from tests.factories import make_ca_issuer, make_certificate
from tests.helpers import drain

pytestmark = pytest.mark.django_db(transaction=True)

KEYSTORES = {
    "pkcs12": {"create": True, "passwordSecretRef": {"name": "p12-pass", "key": "password"}},
    "jks": {
        "create": True,
        "passwordSecretRef": {"name": "p12-pass", "key": "password"},
        "alias": "web",
    },
}


def _issued(name: str = "web", **spec: Any) -> Certificate:
    issuer = Issuer.objects.filter(name="ca").first() or make_ca_issuer()
    cert = make_certificate(name, issuer, **spec)
    drain()
    cert.refresh_from_db()
    assert cert.revision == 1, cert.last_error
    return cert


def _get(token: str | None, path: str, etag: str = "", address: str = "127.0.0.1") -> Any:
    headers = {"If-None-Match": etag} if etag else {}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return Client().get(path, headers=headers, REMOTE_ADDR=address)


def _secret(cert: Certificate) -> Secret:
    return Secret.objects.get(name=cert.secret_name)


def test_token_is_shown_once_and_stored_as_its_digest() -> None:
    cert = _issued()
    token, text = create_download_token("nginx on web1", actor="alice", certificate=cert)
    row = DownloadToken.objects.get(pk=token.pk)
    assert len(text) >= 43
    assert row.digest == hashlib.sha256(text.encode()).hexdigest()
    assert row.prefix == text[:8]
    stored = " ".join(str(getattr(row, f.attname)) for f in DownloadToken._meta.fields)
    assert text not in stored
    created = Event.objects.get(reason="DownloadTokenCreated")
    assert created.certificate_name == "web" and created.actor == "alice"
    assert text not in created.message
    with pytest.raises(TokenError):
        create_download_token("both", actor="a", certificate=cert, name_pattern="web*")
    with pytest.raises(TokenError):
        create_download_token("neither", actor="a")


def test_pem_files_audit_and_the_key_is_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    cert = _issued()
    secret = _secret(cert)
    _, text = create_download_token("web1", actor="alice", certificate=cert)
    caplog.set_level(logging.DEBUG)
    for name, expected in (
        ("tls.crt", secret.tls_crt),
        ("tls.key", secret.tls_key),
        ("ca.crt", secret.ca_crt),
    ):
        response = _get(text, f"/download/web/{name}", address="192.0.2.7")
        assert response.status_code == 200, response.content
        assert response.content.decode() == expected
        assert response["ETag"].startswith('"1-')
        assert response["Cache-Control"].startswith("max-age=0")
    assert "PRIVATE KEY" in secret.tls_key
    assert "PRIVATE KEY" not in caplog.text
    downloads = list(Event.objects.filter(reason="Downloaded").order_by("id"))
    assert [e.message.split()[0] for e in downloads] == ["tls.crt", "tls.key", "ca.crt"]
    assert all("'web1'" in e.message and "192.0.2.7" in e.message for e in downloads)
    assert {e.actor for e in downloads} == {"download-token:web1"}
    assert DownloadToken.objects.get().last_used_at is not None


def test_bad_revoked_and_out_of_scope_tokens() -> None:
    web = _issued("web")
    _issued("db")
    token, text = create_download_token("web1", actor="alice", certificate=web)
    assert _get(None, "/download/web/tls.key").status_code == 401
    assert _get("x" * 43, "/download/web/tls.key").status_code == 401
    other = _get(text, "/download/db/tls.key")
    missing = _get(text, "/download/nothing/tls.key")
    # Another certificate answers exactly as one that does not exist.
    assert (other.status_code, other.content) == (missing.status_code, missing.content)
    assert other.status_code == 404
    assert b"PRIVATE" not in other.content
    assert _get(text, "/download/web/tls.key").status_code == 200
    revoke_download_token(token.pk, actor="bob")
    refused = _get(text, "/download/web/tls.key")
    assert refused.status_code == 401
    assert refused["WWW-Authenticate"].startswith("Bearer")
    assert Event.objects.filter(reason="DownloadTokenRevoked", actor="bob").count() == 1


def test_a_name_pattern_token_reads_matching_certificates_only() -> None:
    _issued("web-a")
    _issued("web-b")
    _issued("db")
    _, text = create_download_token("web fleet", actor="alice", name_pattern="web-*")
    assert _get(text, "/download/web-a/tls.crt").status_code == 200
    assert _get(text, "/download/web-b/tls.crt").status_code == 200
    assert _get(text, "/download/db/tls.crt").status_code == 404


def test_files_not_in_the_spec_are_not_offered() -> None:
    cert = _issued()
    _, text = create_download_token("web1", actor="alice", certificate=cert)
    for name in ("tls-combined.pem", "key.der", "keystore.p12", "keystore.jks", "../x"):
        assert _get(text, f"/download/web/{name}").status_code == 404


def test_every_format_parses() -> None:
    cert = _issued(
        additionalOutputFormats=[{"type": "CombinedPEM"}, {"type": "DER"}], keystores=KEYSTORES
    )
    secret = _secret(cert)
    leaf = x509.load_pem_x509_certificate(secret.tls_crt.encode())
    ca = x509.load_pem_x509_certificate(secret.ca_crt.encode())
    _, text = create_download_token(
        "java app", actor="alice", certificate=cert, keystore_password="s3cret-pass"
    )

    def body(name: str) -> bytes:
        response = _get(text, f"/download/web/{name}")
        assert response.status_code == 200, (name, response.content)
        return bytes(response.content)

    combined = body("tls-combined.pem")
    key = serialization.load_pem_private_key(combined, None)
    chain = x509.load_pem_x509_certificates(combined)
    assert chain[0] == leaf
    assert key.public_key() == leaf.public_key()
    assert x509.load_der_x509_certificate(body("tls.der")) == leaf
    der_key = serialization.load_der_private_key(body("key.der"), None)
    assert der_key.public_key() == leaf.public_key()

    p12 = pkcs12.load_pkcs12(body("keystore.p12"), b"s3cret-pass")
    assert p12.cert is not None and p12.cert.certificate == leaf
    assert p12.key is not None and p12.key.public_key() == leaf.public_key()
    with pytest.raises(ValueError):
        pkcs12.load_pkcs12(body("keystore.p12"), b"wrong")
    trust = pkcs12.load_pkcs12(body("truststore.p12"), b"s3cret-pass")
    assert [c.certificate for c in trust.additional_certs] == [ca]

    store = jks.KeyStore.loads(body("keystore.jks"), "s3cret-pass")
    entry = store.private_keys["web"]
    assert entry.is_decrypted()
    assert x509.load_der_x509_certificate(entry.cert_chain[0][1]) == leaf
    jks_key = serialization.load_der_private_key(entry.pkey_pkcs8, None)
    assert jks_key.public_key() == leaf.public_key()
    truststore = jks.KeyStore.loads(body("truststore.jks"), "s3cret-pass")
    assert x509.load_der_x509_certificate(truststore.certs["ca"].cert) == ca


def test_keystore_password_from_the_spec_secret_or_a_409() -> None:
    cert = _issued(keystores={"pkcs12": KEYSTORES["pkcs12"]})
    _, text = create_download_token("java app", actor="alice", certificate=cert)
    missing = _get(text, "/download/web/keystore.p12")
    assert missing.status_code == 409
    assert b"p12-pass" in missing.content
    opaque = Secret(name="p12-pass", type="Opaque")
    opaque.tls_key = '{"password": "from-the-secret"}'
    opaque.save()
    response = _get(text, "/download/web/keystore.p12")
    assert response.status_code == 200
    assert pkcs12.load_pkcs12(response.content, b"from-the-secret").key is not None


def test_etag_304_until_a_renewal() -> None:
    cert = _issued()
    _, text = create_download_token("web1", actor="alice", certificate=cert)
    first = _get(text, "/download/web/tls.key")
    etag = first["ETag"]
    again = _get(text, "/download/web/tls.key", etag=etag)
    assert again.status_code == 304 and again.content == b""
    assert again["ETag"] == etag
    assert _get(text, "/download/web/tls.crt", etag=etag).status_code == 200
    assert Event.objects.filter(reason="Downloaded").count() == 2  # 304s are not recorded
    actions.force_renew(cert, actor="alice")
    drain()
    cert.refresh_from_db()
    assert cert.revision == 2
    renewed = _get(text, "/download/web/tls.key", etag=etag)
    assert renewed.status_code == 200
    assert renewed["ETag"] != etag and renewed["ETag"].startswith('"2-')
    assert renewed.content != first.content


def test_last_use_is_written_at_most_once_a_minute() -> None:
    cert = _issued()
    token, text = create_download_token("web1", actor="alice", certificate=cert)
    assert _get(text, "/download/web/tls.crt").status_code == 200
    used = DownloadToken.objects.get(pk=token.pk).last_used_at
    assert used is not None
    assert _get(text, "/download/web/tls.crt").status_code == 200
    assert DownloadToken.objects.get(pk=token.pk).last_used_at == used
    DownloadToken.objects.filter(pk=token.pk).update(last_used_at=used - timedelta(minutes=2))
    assert _get(text, "/download/web/tls.crt").status_code == 200
    later = DownloadToken.objects.get(pk=token.pk).last_used_at
    assert later is not None and later >= used  # written again: the last one was 2 min old


def test_the_kubernetes_secret_export_carries_cert_managers_extra_keys() -> None:
    from issuance.kubernetes.csr_connector.secret_export import secret_body
    from issuance.specs.secret_refs import SecretRefError

    cert = _issued(
        additionalOutputFormats=[{"type": "CombinedPEM"}, {"type": "DER"}],
        keystores={"pkcs12": KEYSTORES["pkcs12"]},
    )
    stored = _secret(cert)
    with pytest.raises(SecretRefError):  # the password Secret is missing: the export fails
        secret_body(cert, stored, "default", "web-tls")
    opaque = Secret(name="p12-pass", type="Opaque")
    opaque.tls_key = '{"password": "kube-pass"}'
    opaque.save()
    data = secret_body(cert, stored, "default", "web-tls")["data"]
    assert sorted(data) == sorted(
        [
            "tls.crt",
            "tls.key",
            "ca.crt",
            "tls-combined.pem",
            "key.der",
            "keystore.p12",
            "truststore.p12",
        ]
    )
    p12 = pkcs12.load_pkcs12(base64.b64decode(data["keystore.p12"]), b"kube-pass")
    assert p12.key is not None
    combined = base64.b64decode(data["tls-combined.pem"])
    assert combined.startswith(stored.tls_key.rstrip("\n").encode())
    assert base64.b64decode(data["tls.crt"]).decode() in combined.decode()


def test_the_spec_stores_output_formats_and_keystores() -> None:
    from issuance.specs.certificate import validate_certificate_spec

    spec = {
        "dnsNames": ["web.example.test"],
        "issuerRef": {"name": "ca"},
        "additionalOutputFormats": [{"type": "DER"}, {"type": "CombinedPEM"}],
        "keystores": {**KEYSTORES, "pkcs12": {**KEYSTORES["pkcs12"], "profile": "Modern2023"}},
    }
    out = validate_certificate_spec("web", spec, issuer_exists=None)
    assert out["additionalOutputFormats"] == [{"type": "DER"}, {"type": "CombinedPEM"}]
    assert out["keystores"]["pkcs12"]["profile"] == "Modern2023"
    assert out["keystores"]["jks"] == KEYSTORES["jks"]


def test_a_download_is_a_constant_number_of_queries() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cert = _issued(keystores={"jks": KEYSTORES["jks"]})
    _, text = create_download_token("web1", actor="a", certificate=cert, keystore_password="pw")
    counts = []
    for name in ("tls.crt", "tls.key", "keystore.jks", "tls.crt"):
        with CaptureQueriesContext(connection) as ctx:
            assert _get(text, f"/download/web/{name}").status_code == 200
        counts.append(len(ctx.captured_queries))
    # token + last use (first request only) + certificate + secret + the event
    assert counts[0] <= 6, counts
    assert counts[1] == counts[2] == counts[3] == counts[0] - 1, counts
