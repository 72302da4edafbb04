"""Files from the browser (console/web/certificate_files.py): the certificate, its chain and
full chain, the private key and a PKCS#12 bundle, a CA issuer's certificate and an ACME
issuer's chain: contents, content types, file names, the audit log, and bad input. Who may
download what is in the generated matrix (tests/access/test_permission_matrix.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12
from django.test import Client

from issuance.models import Certificate, Event, Secret
from issuance.pki.x509 import split_pem_chain
from tests.factories import (
    make_acme_issuer,
    make_ca_issuer,
    make_certificate,
    make_selfsigned_issuer,
)
from tests.helpers import drain

pytestmark = pytest.mark.django_db
ClientFor = Callable[[str | None], Client]
PASSWORD = "correct horse battery"


@pytest.fixture
def issued(db: None) -> Certificate:
    """A certificate issued by a CA issuer through the worker (leaf + the CA in tls.crt)."""
    ca = make_ca_issuer("ca")
    cert = make_certificate("web", ca, privateKey={"algorithm": "ECDSA", "size": 256})
    drain()
    cert.refresh_from_db()
    assert Secret.objects.get(name=cert.secret_name).tls_crt
    return cert


def _pems(body: bytes) -> list[x509.Certificate]:
    return [x509.load_pem_x509_certificate(b.encode()) for b in split_pem_chain(body.decode())]


def _attachment(response: object, filename: str, content_type: str) -> None:
    assert response.status_code == 200, response.status_code  # type: ignore[attr-defined]
    assert response["Content-Type"] == content_type  # type: ignore[index]
    disposition = f'attachment; filename="{filename}"'
    assert response["Content-Disposition"] == disposition  # type: ignore[index]


def test_public_files_hold_the_certificate_its_chain_and_both(
    client_for: ClientFor, issued: Certificate
) -> None:
    viewer = client_for("viewer")
    secret = Secret.objects.get(name=issued.secret_name)
    leaf = x509.load_pem_x509_certificate(split_pem_chain(secret.tls_crt)[0].encode())
    ca = x509.load_pem_x509_certificate(Secret.objects.get(name="test-ca").tls_crt.encode())

    cert = viewer.get("/certificates/web/files/cert.pem")
    _attachment(cert, "web.pem", "application/x-pem-file")
    assert _pems(cert.content) == [leaf]

    chain = viewer.get("/certificates/web/files/chain.pem")
    _attachment(chain, "web-chain.pem", "application/x-pem-file")
    assert _pems(chain.content) == [ca]

    full = viewer.get("/certificates/web/files/fullchain.pem")
    _attachment(full, "web-fullchain.pem", "application/x-pem-file")
    assert _pems(full.content) == [leaf, ca]
    assert b"PRIVATE KEY" not in cert.content + chain.content + full.content
    assert not Event.objects.filter(reason="SecretRead").exists()


def test_the_page_offers_the_files_and_the_key_page_to_admins_only(
    client_for: ClientFor, issued: Certificate
) -> None:
    viewer_page = client_for("viewer").get("/certificates/web/").content.decode()
    assert 'href="/certificates/web/files/cert.pem"' in viewer_page
    assert 'href="/certificates/web/files/chain.pem"' in viewer_page
    assert 'href="/certificates/web/files/fullchain.pem"' in viewer_page
    assert "/certificates/web/files/key/" not in viewer_page
    admin_page = client_for("admin").get("/certificates/web/").content.decode()
    assert 'href="/certificates/web/files/key/"' in admin_page


def test_not_issued_yet_offers_nothing(client_for: ClientFor) -> None:
    make_certificate("later", make_selfsigned_issuer("ss"))
    admin = client_for("admin")
    page = admin.get("/certificates/later/").content.decode()
    assert "Nothing to download until the certificate is issued." in page
    assert admin.get("/certificates/later/files/cert.pem").status_code == 404
    assert admin.post("/certificates/later/files/key/key.pem").status_code == 404
    assert admin.get("/certificates/web/files/other.pem").status_code == 404


def test_the_private_key_is_audited(client_for: ClientFor, issued: Certificate) -> None:
    admin = client_for("admin")
    assert admin.get("/certificates/web/files/key/key.pem").status_code == 405  # POST only
    response = admin.post("/certificates/web/files/key/key.pem")
    _attachment(response, "web.key", "application/x-pem-file")
    assert "no-cache" in response["Cache-Control"]
    key = load_pem_private_key(response.content, None)
    leaf = _pems(admin.get("/certificates/web/files/cert.pem").content)[0]
    assert key.public_key() == leaf.public_key()
    event = Event.objects.get(reason="SecretRead", name="web")
    assert event.actor == "admin" and "web.key" in event.message


def test_pkcs12_opens_with_the_typed_password_and_the_password_is_kept_nowhere(
    client_for: ClientFor, issued: Certificate
) -> None:
    admin = client_for("admin")
    form = admin.get("/certificates/web/files/key/").content.decode()
    assert 'action="/certificates/web/files/key/bundle.p12"' in form
    response = admin.post(
        "/certificates/web/files/key/bundle.p12", {"password": PASSWORD, "confirm": PASSWORD}
    )
    _attachment(response, "web.p12", "application/x-pkcs12")
    key, leaf, extra = pkcs12.load_key_and_certificates(response.content, PASSWORD.encode())
    assert key is not None and leaf is not None
    assert key.public_key() == leaf.public_key()
    assert (
        leaf.subject.rfc4514_string()
        == _pems(admin.get("/certificates/web/files/cert.pem").content)[0].subject.rfc4514_string()
    )
    assert [c.subject for c in extra] == [
        c.subject for c in _pems(admin.get("/certificates/web/files/chain.pem").content)
    ]
    with pytest.raises(ValueError):
        pkcs12.load_key_and_certificates(response.content, b"wrong password")
    event = Event.objects.get(reason="SecretRead", name="web")
    assert "web.p12" in event.message
    assert not any(PASSWORD in e.message for e in Event.objects.all())


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"password": "", "confirm": ""}, "password", "This field is required."),
        ({"password": "short", "confirm": "short"}, "password", "at least 8 characters"),
        ({"password": PASSWORD, "confirm": PASSWORD + "x"}, "confirm", "does not match"),
    ],
)
def test_bad_pkcs12_passwords_are_refused_naming_the_field(
    client_for: ClientFor, issued: Certificate, data: dict[str, str], field: str, message: str
) -> None:
    response = client_for("admin").post("/certificates/web/files/key/bundle.p12", data)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert message in response.content.decode()
    assert field in response.context["form"].errors
    assert PASSWORD not in response.content.decode()  # never sent back
    assert not Event.objects.filter(reason="SecretRead").exists()


def test_ca_issuer_offers_its_certificate_and_acme_issuer_its_chain(
    client_for: ClientFor, issued: Certificate
) -> None:
    viewer = client_for("viewer")
    ca = viewer.get("/issuers/ca/files/ca.pem")
    _attachment(ca, "ca-ca.pem", "application/x-pem-file")
    assert _pems(ca.content) == _pems(Secret.objects.get(name="test-ca").tls_crt.encode())

    acme = make_acme_issuer("acme")
    assert viewer.get("/issuers/acme/files/chain.pem").status_code == 404  # nothing issued
    page = viewer.get("/issuers/").content.decode()
    assert 'href="/issuers/ca/files/ca.pem"' in page
    assert "/issuers/acme/files/chain.pem" not in page
    # An issued certificate of the ACME issuer: its chain is what the CA sent after the leaf.
    from_acme = make_certificate("site", acme)
    stored = Secret.objects.get(name=issued.secret_name)
    Secret.objects.create(
        name=from_acme.secret_name,
        tls_crt=stored.tls_crt,
        ca_crt=stored.ca_crt,
        certificate=from_acme,
    )
    chain = viewer.get("/issuers/acme/files/chain.pem")
    _attachment(chain, "acme-chain.pem", "application/x-pem-file")
    assert _pems(chain.content) == _pems(stored.tls_crt.encode())[1:]
    assert 'href="/issuers/acme/files/chain.pem"' in viewer.get("/issuers/").content.decode()
    assert viewer.get("/issuers/acme/files/ca.pem").status_code == 404
    assert viewer.get("/issuers/ca/files/chain.pem").status_code == 404
