"""Files downloaded from the browser, in a real Chromium against the real app: each file of
a certificate (PEM, chain, full chain, private key, PKCS#12 with a typed password), a CA
issuer's certificate and an ACME issuer's chain, saved through Playwright's download API and
opened with `cryptography`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key, pkcs12
from django.contrib.auth.models import User

from issuance.models import Event, Secret
from tests.browser.a11y import check_page
from tests.browser.pages import csrf_token, login
from tests.factories import make_acme_issuer, make_ca_issuer, make_certificate
from tests.helpers import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]
PASSWORD = "typed in the browser"


def _download(page: Any, selector: str) -> tuple[str, bytes]:
    """Click and save what the browser downloads: (its suggested file name, its bytes)."""
    with page.expect_download() as info:
        page.click(selector)
    download = info.value
    return download.suggested_filename, Path(download.path()).read_bytes()


def _certs(body: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(body)


def test_every_file_opens(new_page: NewPage, role_users: dict[str, User]) -> None:
    ca = make_ca_issuer("files-ca", secret_name="files-ca-key")
    make_certificate("shop", ca, privateKey={"algorithm": "ECDSA", "size": 256})
    page = new_page()  # starts the server, whose worker issues the certificate
    wait_for(
        lambda: Secret.objects.filter(name="shop-tls").exclude(tls_crt="").exists(),
        what="the worker issues shop",
    )
    ca_cert = x509.load_pem_x509_certificate(
        Secret.objects.get(name="files-ca-key").tls_crt.encode()
    )
    # An ACME issuer's chain is the one its CA sent with the newest certificate stored.
    acme = make_acme_issuer("files-acme")
    stored = Secret.objects.get(name="shop-tls")
    Secret.objects.create(
        name="site-tls",
        tls_crt=stored.tls_crt,
        ca_crt=stored.ca_crt,
        certificate=make_certificate("site", acme),
    )

    login(page, "admin")
    page.goto("/certificates/shop/")
    name, body = _download(page, "#download-cert")
    assert name == "shop.pem"
    (leaf,) = _certs(body)
    assert leaf.issuer == ca_cert.subject
    name, body = _download(page, "#download-chain")
    assert name == "shop-chain.pem" and _certs(body) == [ca_cert]
    name, body = _download(page, "#download-fullchain")
    assert name == "shop-fullchain.pem" and _certs(body) == [leaf, ca_cert]

    page.click("#download-key-page")
    page.wait_for_url("**/certificates/shop/files/key/")
    check_page(page, "certificate-key-files")
    name, body = _download(page, "#download-key")
    assert name == "shop.key"
    assert load_pem_private_key(body, None).public_key() == leaf.public_key()

    page.fill("#pkcs12-form input[name=password]", PASSWORD)
    page.fill("#pkcs12-form input[name=confirm]", PASSWORD)
    name, body = _download(page, "#download-p12")
    assert name == "shop.p12"
    key, bundled, extra = pkcs12.load_key_and_certificates(body, PASSWORD.encode())
    assert bundled == leaf and extra == [ca_cert]
    assert key is not None and key.public_key() == leaf.public_key()
    reads = Event.objects.filter(reason="SecretRead", name="shop", actor="admin")
    assert sorted(e.message.rsplit(" ", 1)[-1] for e in reads) == ["shop.key", "shop.p12"]
    assert not Event.objects.filter(message__contains=PASSWORD).exists()

    page.goto("/issuers/")
    name, body = _download(page, "[data-issuer-file=ca]")
    assert name == "files-ca-ca.pem" and _certs(body) == [ca_cert]
    name, body = _download(page, "[data-issuer-file=chain]")
    assert name == "files-acme-chain.pem" and _certs(body) == [ca_cert]


def test_a_viewer_gets_public_files_but_no_key(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    make_certificate("open", make_ca_issuer("open-ca", secret_name="open-ca-key"))
    page = new_page()  # starts the server, whose worker issues the certificate
    wait_for(
        lambda: Secret.objects.filter(name="open-tls").exclude(tls_crt="").exists(),
        what="the worker issues open",
    )
    login(page, "viewer")
    page.goto("/certificates/open/")
    name, body = _download(page, "#download-fullchain")
    assert name == "open-fullchain.pem" and len(_certs(body)) == 2
    assert page.locator("#download-key-page").count() == 0
    # A crafted POST with the viewer's own session and CSRF token: refused, naming the role.
    answer = page.request.post(
        "/certificates/open/files/key/key.pem", headers={"X-CSRFToken": csrf_token(page)}
    )
    assert answer.status == 403
    assert "admin role" in answer.text()
    assert not Event.objects.filter(reason="SecretRead").exists()
