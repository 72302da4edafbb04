"""Issuers managed in the browser: an admin makes an ACME issuer (preset, then a custom
directory URL: the local fake CA over TLS, since there is no internet here; its profiles
and terms read from the directory) and a generated CA, edits one and deletes one; a viewer
sees no edit controls and gets 403 on a crafted POST."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import Issuer, Secret
from tests.acme.fakeca import FakeCA
from tests.browser.a11y import check_page
from tests.browser.pages import login

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]
STAGING = "https://acme-staging-v02.api.letsencrypt.org/directory"


@pytest.fixture
def fake_ca() -> Iterator[FakeCA]:
    ca = FakeCA(tls=True)
    ca.set_meta(
        termsOfService="https://ca.example.test/terms-2025.pdf",
        profiles={"classic": "90 days", "shortlived": "6 days"},
    )
    yield ca
    ca.stop()


def test_admin_creates_edits_and_deletes_issuers(
    server: str,
    new_page: Callable[..., Any],
    role_users: dict[str, User],
    fake_ca: FakeCA,
) -> None:
    page = new_page()
    login(page, "admin")
    page.goto("/issuers/")
    page.click("#issuer-new")
    page.wait_for_url(re.compile(r"/new-issuer/$"))

    # Picking a preset reads that CA's directory; here (and in CI) there is no internet,
    # and a test must not depend on it: those reads get an empty answer.
    def no_internet(route: Any) -> None:
        if "custom" not in (route.request.post_data or ""):
            route.fulfill(status=200, body='<div id="acme-directory">offline</div>')
        else:
            route.continue_()

    page.route("**/new-issuer/directory/", no_internet)
    # The preset fills the directory URL; a custom URL points at the local CA.
    page.select_option("#id_preset", "letsencrypt")
    page.select_option("#id_preset", "letsencrypt-staging")
    assert page.input_value("#id_server") == STAGING
    page.fill("#id_name", "staging")
    page.select_option("#id_preset", "custom")
    page.fill("#id_server", fake_ca.directory_url)
    page.fill("#id_ca_bundle", fake_ca.ca_bundle_b64)
    page.click("#load-directory")
    tos = page.locator("#tos-link")
    tos.wait_for()
    assert tos.get_attribute("href") == "https://ca.example.test/terms-2025.pdf"
    page.select_option("#id_profile", "shortlived")
    page.fill("#id_email", "ops@example.com")
    page.select_option("#id_solver-0-type", "http01")
    # Not saved without accepting the terms: the error is next to the checkbox.
    page.click("#issuer-save")
    page.locator("#accept_tos-errors").wait_for()
    assert not Issuer.objects.filter(name="staging").exists()
    page.check("#id_accept_tos")
    page.fill("#id_ca_bundle", fake_ca.ca_bundle_b64)
    page.select_option("#id_profile", "shortlived")
    check_page(page, "issuers-acme-form")
    page.click("#issuer-save")
    page.wait_for_url(re.compile(r"/issuers/$"))
    page.locator("tr[data-issuer=staging]").wait_for()
    spec = Issuer.objects.get(name="staging").spec["acme"]
    assert spec["server"] == fake_ca.directory_url and spec["profile"] == "shortlived"
    assert spec["solvers"] == [{"http01": {}}]

    # A CA issuer, generated.
    page.click("#issuer-new")
    page.wait_for_url(re.compile(r"/new-issuer/$"))  # loaded: the form's script listens
    page.fill("#id_name", "corp-ca")
    page.select_option("#id_kind", "ca")
    assert page.locator("fieldset[data-kind=acme]").is_hidden()
    page.check("input[name=ca_mode][value=generate]")
    page.fill("#id_ca_common_name", "Corp Root")
    page.click("#issuer-save")
    page.wait_for_url(re.compile(r"/issuers/$"))
    page.locator("tr[data-issuer=corp-ca]").wait_for()
    assert Issuer.objects.get(name="corp-ca").spec["ca"]["commonName"] == "Corp Root"

    # Edit the ACME issuer: the same server needs no new acceptance.
    page.locator("tr[data-issuer=staging] [data-issuer-edit]").click()
    page.wait_for_url(re.compile(r"/issuers/staging/edit/$"))
    assert page.input_value("#id_server") == fake_ca.directory_url
    page.fill("#id_email", "pki@example.com")
    # A DNS-01 solver: the provider's fields appear once it is chosen.
    token_field = page.locator("#id_solver-1-cloudflare-apiToken")
    assert token_field.is_hidden()
    page.select_option("#id_solver-1-type", "dns01")
    page.select_option("#id_solver-1-provider", "cloudflare")
    token_field.fill("cf-browser-token-77")
    page.fill("#id_solver-1-dns_zones", "example.com")
    page.click("#issuer-save")
    page.wait_for_url(re.compile(r"/issuers/$"))
    spec = Issuer.objects.get(name="staging").spec["acme"]
    assert spec["email"] == "pki@example.com"
    assert spec["solvers"][1]["dns01"]["cloudflare"] == {
        "apiTokenSecretRef": {"name": "staging-dns-1", "key": "apiToken"}
    }
    assert json.loads(Secret.objects.get(name="staging-dns-1").tls_key) == {
        "apiToken": "cf-browser-token-77"
    }
    # Write-only: the edit page says a token is stored, never what it is.
    page.goto("/issuers/staging/edit/")
    assert "cf-browser-token-77" not in page.content()
    assert page.locator("[data-solver='1'] [data-secret-set]").is_visible()
    assert page.input_value("#id_solver-1-cloudflare-apiToken") == ""
    check_page(page, "issuers-edit")
    page.goto("/issuers/")

    # Delete the CA issuer through its confirmation page.
    page.locator("tr[data-issuer=corp-ca] [data-issuer-delete]").click()
    page.wait_for_url(re.compile(r"/issuers/corp-ca/delete/$"))
    assert "No certificate uses" in page.inner_text("#issuer-delete")
    check_page(page, "issuers-delete")
    page.click("#issuer-delete-submit")
    page.wait_for_url(re.compile(r"/issuers/$"))
    assert not Issuer.objects.filter(name="corp-ca").exists()
    assert page.locator("tr[data-issuer=corp-ca]").count() == 0


def test_viewer_sees_no_edit_controls_and_cannot_post(
    server: str, new_page: Callable[..., Any], role_users: dict[str, User]
) -> None:
    Issuer.objects.create(name="ss", kind="selfSigned", spec={"selfSigned": {}})
    page = new_page()
    login(page, "viewer")
    page.goto("/issuers/")
    page.locator("tr[data-issuer=ss]").wait_for()
    assert page.locator("#issuer-new, [data-issuer-edit], [data-issuer-delete]").count() == 0
    token = page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value")
    for url, form in (
        ("/new-issuer/", {"name": "x", "kind": "selfSigned"}),
        ("/issuers/ss/delete/", {}),
        ("/issuers/ss/edit/", {"kind": "selfSigned", "max_duration": "1h"}),
    ):
        response = page.request.post(url, form={"csrfmiddlewaretoken": token, **form})
        assert response.status == 403, url
    assert page.request.get("/new-issuer/").status == 403
    assert list(Issuer.objects.values_list("name", "spec")) == [("ss", {"selfSigned": {}})]
