"""The certificate's download tokens page: operators only, the token shown once, revoke."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from django.test import Client

from issuance.models import DownloadToken, Issuer
from tests.factories import make_certificate


def test_page_roles_shown_once_and_revoke(
    client_for: Callable[[str | None], Client], issuer: Issuer
) -> None:
    make_certificate("web", issuer)
    make_certificate("db", issuer)
    viewer = client_for("viewer")
    assert viewer.get("/certificates/web/downloads/").status_code == 403
    assert viewer.post("/certificates/web/downloads/", {"name": "x"}).status_code == 403
    operator = client_for("operator")
    page = operator.get("/certificates/web/downloads/")
    assert page.status_code == 200 and b"No download tokens yet" in page.content
    created = operator.post(
        "/certificates/web/downloads/", {"name": "web1", "keystore_password": "pw"}, follow=True
    )
    assert created.redirect_chain == [("/certificates/web/downloads/", 302)]
    assert created.status_code == 200
    token = DownloadToken.objects.get()
    text = created.context["token_text"]
    assert token.digest == hashlib.sha256(text.encode()).hexdigest()
    assert token.certificate is not None and token.certificate.name == "web"
    assert text in created.content.decode()
    again = operator.get("/certificates/web/downloads/")
    assert text not in again.content.decode() and "web1" in again.content.decode()
    assert operator.post("/certificates/web/downloads/", {"name": ""}).status_code == 400
    # A token of another certificate is not revoked through this one's page.
    assert operator.post(f"/certificates/db/downloads/{token.pk}/revoke/").status_code == 404
    revoked = operator.post(f"/certificates/web/downloads/{token.pk}/revoke/")
    assert revoked.status_code == 302
    assert DownloadToken.objects.get().revoked_at is not None
    assert viewer.post(f"/certificates/web/downloads/{token.pk}/revoke/").status_code == 403
