"""Issuers made, changed and deleted in the console (admin): each kind, write-only secrets,
the CA's terms, the API's field errors next to the field, the delete confirmation."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from issuance.acme import health
from issuance.models import CertificateRequest, Event, Issuer, Secret
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from tests.acme.fakeca import FakeCA
from tests.factories import make_acme_issuer, make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db
ClientFor = Callable[[str | None], Client]
STAGING = "https://acme-staging-v02.api.letsencrypt.org/directory"


def acme_form(name: str = "le", **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "kind": "acme",
        "preset": "letsencrypt-staging",
        "email": "ops@example.com",
        "solver_slots": "2",
        "solver-0-type": "http01",
        "accept_tos": "1",
    }
    data.update(fields)
    return data


def errors_of(response: Any, field: str) -> str:
    """The text of the error list rendered next to `field`."""
    match = re.search(
        rf'<ul class="errorlist" id="{re.escape(field)}-errors">(.*?)</ul>',
        response.content.decode(),
        re.S,
    )
    return match.group(1) if match else ""


def ca_pem(is_ca: bool = True) -> tuple[str, str]:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    csr = build_csr(key, {"commonName": "Uploaded CA"})
    cert = sign_csr(csr, key, None, duration=timedelta(days=30), now=timezone.now(), is_ca=is_ca)
    return cert, private_key_to_pem(key, "PKCS8")


# -- roles ------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "operator", "approver", "nobody"])
def test_only_admins_make_change_or_delete_issuers(client_for: ClientFor, role: str) -> None:
    make_selfsigned_issuer("keep")
    client = client_for(role)
    for url in ("/new-issuer/", "/issuers/keep/edit/", "/issuers/keep/delete/"):
        assert client.get(url).status_code == 403, url
    assert client.post("/new-issuer/", acme_form("crafted")).status_code == 403
    assert client.post("/issuers/keep/delete/").status_code == 403
    assert client.post("/new-issuer/directory/", {"server": STAGING}).status_code == 403
    assert set(Issuer.objects.values_list("name", flat=True)) == {"keep"}
    # The list shows no edit controls to them.
    page = client_for(role).get("/issuers/")
    if role != "nobody":
        html = page.content.decode()
        assert "/issuers/keep/edit/" not in html and "/new-issuer/" not in html


def test_anonymous_users_are_sent_to_the_login_page(client_for: ClientFor) -> None:
    response = client_for(None).get("/new-issuer/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_admins_see_edit_controls_in_the_list_and_its_partial(client_for: ClientFor) -> None:
    make_selfsigned_issuer("ss")
    admin = client_for("admin")
    for url in ("/issuers/", "/partials/issuers/"):
        html = admin.get(url).content.decode()
        assert "/issuers/ss/edit/" in html and "/issuers/ss/delete/" in html, url


# -- ACME -------------------------------------------------------------------------------


def test_create_acme_issuer_from_a_preset(client_for: ClientFor) -> None:
    form = acme_form(server="https://ignored.example/dir", cluster="1")
    response = client_for("admin").post("/new-issuer/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    issuer = Issuer.objects.get(name="le")
    assert issuer.kind == "acme" and issuer.cluster_scoped
    # The preset decides the URL, not what the server field said.
    assert issuer.spec == {
        "acme": {"server": STAGING, "email": "ops@example.com", "solvers": [{"http01": {}}]}
    }
    accepted = Event.objects.get(name="le", reason="TermsOfServiceAccepted")
    assert accepted.actor == "admin" and STAGING in accepted.message


def test_terms_must_be_accepted_and_nothing_is_stored_without(client_for: ClientFor) -> None:
    form = acme_form()
    del form["accept_tos"]
    response = client_for("admin").post("/new-issuer/", form)
    assert response.status_code == 400
    assert "terms of service" in errors_of(response, "accept_tos")
    assert not Issuer.objects.exists()


def test_spec_errors_are_shown_next_to_their_fields(client_for: ClientFor) -> None:
    form = acme_form(
        preset="custom",
        server="http://plain.example/dir",
        email="not-an-email",
        **{"solver-0-dns_zones": "bad_zone!", "solver-1-type": "dns01"},
    )
    response = client_for("admin").post("/new-issuer/", form)
    assert response.status_code == 400
    assert "spec.acme.server: must be an https URL" in errors_of(response, "server")
    assert "spec.acme.email" in errors_of(response, "email")
    assert "spec.acme.solvers[0].selector.dnsZones[0]" in errors_of(response, "solver-0-dns_zones")
    assert "spec.acme.solvers[1].dns01: set exactly one provider" in errors_of(
        response, "solver-1-provider"
    )
    assert not Issuer.objects.exists() and not Secret.objects.exists()
    bad_name = client_for("admin").post("/new-issuer/", acme_form("Bad Name!"))
    assert bad_name.status_code == 400 and errors_of(bad_name, "name").startswith("<li>name: ")
    # What was typed is kept (so it can be corrected).
    assert 'value="not-an-email"' in response.content.decode()


def test_eab_hmac_key_is_write_only_and_kept_when_left_empty(client_for: ClientFor) -> None:
    admin = client_for("admin")
    missing = admin.post("/new-issuer/", acme_form("zs", preset="zerossl"))
    assert missing.status_code == 400
    assert "requires External Account Binding" in errors_of(missing, "eab_key_id")

    hmac = "c2VjcmV0LWhtYWMta2V5LWZvci10ZXN0cw"
    form = acme_form("zs", preset="zerossl", eab_key_id="kid-1", eab_hmac_key=hmac)
    assert admin.post("/new-issuer/", form).status_code == 302
    issuer = Issuer.objects.get(name="zs")
    eab = issuer.spec["acme"]["externalAccountBinding"]
    assert eab == {"keyID": "kid-1", "keySecretRef": {"name": "zs-eab", "key": "secret"}}
    secret = Secret.objects.get(name="zs-eab")
    assert json.loads(secret.tls_key) == {"secret": hmac}
    assert hmac not in json.dumps(issuer.spec)

    page = admin.get("/issuers/zs/edit/").content.decode()
    assert hmac not in page
    assert 'id="eab-hmac-set"' in page and 'value="kid-1"' in page

    # Saved again with the key field empty: the stored key stays, nothing else changes.
    edit = {**form, "eab_hmac_key": "", "email": "new@example.com"}
    del edit["accept_tos"]  # same server: no new acceptance needed
    response = admin.post("/issuers/zs/edit/", edit)
    assert response.status_code == 302, response.content.decode()[:3000]
    issuer.refresh_from_db()
    assert issuer.spec["acme"]["externalAccountBinding"] == eab
    assert issuer.spec["acme"]["email"] == "new@example.com"
    assert json.loads(Secret.objects.get(name="zs-eab").tls_key) == {"secret": hmac}
    # A changed server needs the terms accepted again.
    moved = admin.post("/issuers/zs/edit/", {**edit, "preset": "google"})
    assert moved.status_code == 400 and errors_of(moved, "accept_tos")


def test_dns01_credentials_go_into_encrypted_secrets(client_for: ClientFor) -> None:
    admin = client_for("admin")
    token = "cf-token-value-123"
    tsig = "c2VjcmV0dHNpZw=="
    form = acme_form(
        "dns",
        **{
            "solver_slots": "3",
            "solver-0-type": "dns01",
            "solver-0-provider": "cloudflare",
            "solver-0-cloudflare-apiToken": token,
            "solver-0-dns_zones": "example.com",
            "solver-1-type": "dns01",
            "solver-1-provider": "rfc2136",
            "solver-1-rfc2136-nameserver": "ns1.example.org:53",
            "solver-1-rfc2136-tsigKeyName": "acme.",
            "solver-1-rfc2136-tsigAlgorithm": "HMACSHA256",
            "solver-1-rfc2136-tsigSecret": tsig,
            "solver-1-dns_zones": "example.org",
            "solver-2-type": "http01",
        },
    )
    response = admin.post("/new-issuer/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    solvers = Issuer.objects.get(name="dns").spec["acme"]["solvers"]
    assert solvers[0] == {
        "selector": {"dnsZones": ["example.com"]},
        "dns01": {"cloudflare": {"apiTokenSecretRef": {"name": "dns-dns-0", "key": "apiToken"}}},
    }
    assert solvers[1]["dns01"]["rfc2136"]["tsigSecretSecretRef"] == {
        "name": "dns-tsig-1",
        "key": "secret",
    }
    assert json.loads(Secret.objects.get(name="dns-dns-0").tls_key) == {"apiToken": token}
    page = admin.get("/issuers/dns/edit/").content.decode()
    assert token not in page and tsig not in page
    assert page.count("data-secret-set") == 2
    assert 'value="ns1.example.org:53"' in page

    # Saved unchanged: the references stay.
    edit = {k: v for k, v in form.items() if not k.endswith(("apiToken", "tsigSecret"))}
    assert admin.post("/issuers/dns/edit/", edit).status_code == 302
    assert Issuer.objects.get(name="dns").spec["acme"]["solvers"] == solvers


def test_edit_keeps_spec_fields_the_form_does_not_show(client_for: ClientFor) -> None:
    policy = {"autoApprove": "all"}
    spec = {
        "acme": {"server": STAGING, "preferredChain": "ISRG Root X1", "solvers": [{"http01": {}}]},
        "approvalPolicy": policy,
    }
    Issuer.objects.create(name="kept", kind="acme", spec=spec)
    page = client_for("admin").get("/issuers/kept/edit/")
    assert page.status_code == 200
    form = acme_form("kept", email="a@example.com")
    del form["accept_tos"]
    assert client_for("admin").post("/issuers/kept/edit/", form).status_code == 302
    stored = Issuer.objects.get(name="kept").spec
    assert stored["approvalPolicy"] == policy
    assert stored["acme"]["preferredChain"] == "ISRG Root X1"
    assert stored["acme"]["email"] == "a@example.com"


def test_solver_match_labels_are_edited_shown_and_checked(client_for: ClientFor) -> None:
    """A solver's selector.matchLabels as `key=value` items; an edit shows and keeps them,
    a bad key is named next to the field and nothing is stored."""
    form = acme_form(**{"solver-0-match_labels": "team=payments, env=prod"})
    response = client_for("admin").post("/new-issuer/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    solver = Issuer.objects.get(name="le").spec["acme"]["solvers"][0]
    assert solver == {
        "selector": {"matchLabels": {"env": "prod", "team": "payments"}},
        "http01": {},
    }
    page = client_for("admin").get("/issuers/le/edit/")
    assert 'value="env=prod, team=payments"' in page.content.decode()

    bad = acme_form("other", **{"solver-0-match_labels": "bad key=x"})
    response = client_for("admin").post("/new-issuer/", bad)
    assert response.status_code == 400
    assert "spec.acme.solvers[0].selector.matchLabels[bad key]" in errors_of(
        response, "solver-0-match_labels"
    )
    assert not Issuer.objects.filter(name="other").exists()


# -- CA and selfSigned ------------------------------------------------------------------


def test_create_a_generated_ca_and_a_self_signed_issuer(client_for: ClientFor) -> None:
    admin = client_for("admin")
    form = {"name": "corp", "kind": "ca", "ca_mode": "generate", "ca_common_name": "Corp CA"}
    assert admin.post("/new-issuer/", form).status_code == 302
    issuer = Issuer.objects.get(name="corp")
    assert issuer.spec == {
        "ca": {"generate": True, "secretName": "corp-ca", "commonName": "Corp CA"}
    }
    assert "BEGIN CERTIFICATE" in Secret.objects.get(name="corp-ca").tls_crt
    assert not Event.objects.filter(reason="TermsOfServiceAccepted").exists()

    form = {"name": "ss", "kind": "selfSigned", "max_duration": "720h"}
    assert admin.post("/new-issuer/", form).status_code == 302
    assert Issuer.objects.get(name="ss").spec == {"selfSigned": {"maxDuration": "720h0m0s"}}


def test_uploaded_ca_is_validated_before_saving(client_for: ClientFor) -> None:
    admin = client_for("admin")
    cert, key = ca_pem()
    _other_cert, other_key = ca_pem()
    form = {"name": "up", "kind": "ca", "ca_mode": "upload", "ca_certificate": cert}
    response = admin.post("/new-issuer/", {**form, "ca_private_key": other_key})
    assert response.status_code == 400
    assert "does not match the certificate" in errors_of(response, "ca_private_key")
    assert other_key.strip() not in response.content.decode()
    assert not Issuer.objects.exists() and not Secret.objects.exists()

    leaf, leaf_key = ca_pem(is_ca=False)
    response = admin.post(
        "/new-issuer/", {**form, "ca_certificate": leaf, "ca_private_key": leaf_key}
    )
    assert "is not a CA certificate" in errors_of(response, "ca_certificate")

    assert admin.post("/new-issuer/", {**form, "ca_private_key": key}).status_code == 302
    assert Issuer.objects.get(name="up").spec == {"ca": {"secretName": "up-ca"}}
    page = admin.get("/issuers/up/edit/").content.decode()
    assert key.strip().splitlines()[1] not in page
    # Kept as it is when saved without a new upload.
    assert admin.post("/issuers/up/edit/", {"kind": "ca", "ca_mode": "keep"}).status_code == 302
    assert Issuer.objects.get(name="up").spec == {"ca": {"secretName": "up-ca"}}


# -- delete -----------------------------------------------------------------------------


def test_delete_confirmation_counts_certificates_and_refuses(client_for: ClientFor) -> None:
    issuer = make_selfsigned_issuer("busy")
    for i in range(3):
        make_certificate(f"c{i}", issuer)
    admin = client_for("admin")
    page = admin.get("/issuers/busy/delete/").content.decode()
    assert "3 certificates" in page and "cannot be deleted" in page
    assert "issuer-delete-submit" not in page and "/certificates/c2/" in page
    assert admin.post("/issuers/busy/delete/").status_code == 302
    assert Issuer.objects.filter(name="busy").exists()

    make_selfsigned_issuer("idle")
    page = admin.get("/issuers/idle/delete/").content.decode()
    assert "No certificate uses" in page and "issuer-delete-submit" in page
    assert admin.post("/issuers/idle/delete/").status_code == 302
    assert not Issuer.objects.filter(name="idle").exists()
    assert Event.objects.get(name="idle", reason="Deleted").actor == "admin"


def test_requests_of_no_certificate_also_keep_an_issuer(client_for: ClientFor) -> None:
    issuer = make_selfsigned_issuer("ext")
    CertificateRequest.objects.create(name="kubelet-1", issuer=issuer, spec={"request": "x"})
    admin = client_for("admin")
    page = admin.get("/issuers/ext/delete/").content.decode()
    assert 'id="issuer-requests">1 certificate request ' in page
    assert "issuer-delete-submit" not in page
    admin.post("/issuers/ext/delete/")
    assert Issuer.objects.filter(name="ext").exists()


def test_delete_page_queries_do_not_grow_with_certificates(client_for: ClientFor) -> None:
    issuer = make_selfsigned_issuer("many")
    admin = client_for("admin")

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert admin.get("/issuers/many/delete/").status_code == 200
        return len(ctx.captured_queries)

    make_certificate("c0", issuer)
    count()
    few = count()
    for i in range(1, 40):
        make_certificate(f"c{i}", issuer)
    assert count() == few


# -- the CA's directory -----------------------------------------------------------------


@pytest.fixture
def tls_ca() -> Iterator[FakeCA]:
    ca = FakeCA(tls=True)
    yield ca
    ca.stop()


def test_directory_profiles_and_terms_are_read_from_the_ca(
    client_for: ClientFor, tls_ca: FakeCA
) -> None:
    tls_ca.set_meta(
        termsOfService="https://ca.example.test/terms.pdf",
        profiles={"classic": "90-day certificates", "shortlived": "6-day certificates"},
        externalAccountRequired=True,
    )
    data = {"preset": "custom", "server": tls_ca.directory_url, "ca_bundle": tls_ca.ca_bundle_b64}
    response = client_for("admin").post("/new-issuer/directory/", data)
    html = response.content.decode()
    assert response.status_code == 200
    assert 'href="https://ca.example.test/terms.pdf"' in html
    assert '<option value="shortlived">' in html and "requires External Account" in html
    # The form's own button (no JavaScript) shows the same, without saving anything.
    form = acme_form("x", preset="custom", server=tls_ca.directory_url, _action="directory")
    form["ca_bundle"] = tls_ca.ca_bundle_b64
    page = client_for("admin").post("/new-issuer/", form).content.decode()
    assert '<option value="classic">' in page and "terms.pdf" in page
    assert not Issuer.objects.exists()


def test_directory_failures_are_messages_not_errors(client_for: ClientFor, tls_ca: FakeCA) -> None:
    port = tls_ca.port
    tls_ca.stop()
    dead = f"https://127.0.0.1:{port}/dir"
    response = client_for("admin").post("/new-issuer/directory/", {"server": dead})
    assert response.status_code == 200
    assert "Could not read the directory" in response.content.decode()
    assert "ConnectionError" in response.content.decode()
    # Not a CA, and a plain-http URL.
    for server, why in (
        ("http://127.0.0.1:1/dir", "must be an https URL"),
        ("", "enter the directory URL first"),
    ):
        html = client_for("admin").post("/new-issuer/directory/", {"server": server})
        assert why in html.content.decode()


def test_untrusted_directory_certificate_is_reported(client_for: ClientFor, tls_ca: FakeCA) -> None:
    response = client_for("admin").post("/new-issuer/directory/", {"server": tls_ca.directory_url})
    assert "SSLError" in response.content.decode()


# -- query counts -----------------------------------------------------------------------


def test_issuer_list_queries_do_not_grow_with_issuers(client_for: ClientFor) -> None:
    admin = client_for("admin")

    def count() -> int:
        health.forget()  # the CA-outage view is cached for a second: count it every time
        with CaptureQueriesContext(connection) as ctx:
            assert admin.get("/issuers/").status_code == 200
        return len(ctx.captured_queries)

    for i in range(3):
        make_acme_issuer(f"a{i}")
    count()  # the first request of a session loads more (session, caches)
    few = count()
    for i in range(3, 30):
        make_acme_issuer(f"a{i}")
        make_selfsigned_issuer(f"s{i}")
    assert count() == few


def test_lexicon_provider_options_and_credential(client_for: ClientFor) -> None:
    admin = client_for("admin")
    form = acme_form(
        "lx",
        **{
            "solver-0-type": "dns01",
            "solver-0-provider": "lexicon",
            "solver-0-lexicon-provider": "powerdns",
            "solver-0-lexicon-options": "pdns_server=http://pdns.example.test:8081\nttl=120",
            "solver-0-lexicon-credentialName": "auth_token",
            "solver-0-lexicon-credentialValue": "pdns-api-key-9",
        },
    )
    response = admin.post("/new-issuer/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    block = Issuer.objects.get(name="lx").spec["acme"]["solvers"][0]["dns01"]["lexicon"]
    assert block == {
        "provider": "powerdns",
        "pdns_server": "http://pdns.example.test:8081",
        "ttl": 120,
        "credentialsSecretRef": {"name": "lx-dns-0"},
    }
    assert json.loads(Secret.objects.get(name="lx-dns-0").tls_key) == {
        "auth_token": "pdns-api-key-9"
    }
    page = admin.get("/issuers/lx/edit/").content.decode()
    assert "pdns-api-key-9" not in page and "pdns_server=http://pdns.example.test:8081" in page
    # An unknown option is the spec's error, shown next to the options box.
    bad = {**form, "solver-0-lexicon-options": "pdns_serverr=http://x"}
    del bad["accept_tos"]
    response = admin.post("/issuers/lx/edit/", bad)
    assert "unknown option" in errors_of(response, "solver-0-lexicon-options")


class _FormValues(HTMLParser):
    """The values a browser would submit from a page's forms: text inputs, checked boxes,
    selected options, text areas (enough for the issuer form)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        name = a.get("name", "")
        if tag == "input" and name and a.get("type") not in ("submit", "button"):
            if a.get("type") in ("checkbox", "radio"):
                if "checked" in a:
                    self.values[name] = a.get("value") or "on"
            else:
                self.values[name] = a.get("value", "")
        elif tag == "select":
            self._select = name
        elif tag == "option" and self._select and "selected" in a:
            self.values[self._select] = a.get("value", "")
        elif tag == "textarea":
            self._textarea = name
            self.values[name] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            self.values[self._textarea] += data


def test_saving_the_edit_form_unchanged_keeps_every_solver_field(client_for: ClientFor) -> None:
    """Solver fields the form has no input for (waitInsteadOfSelfCheck, a cert-manager-form
    webhook, Azure's managed identity) survive an edit: the form's solvers start from the
    stored ones (they were dropped on save before)."""
    solvers = [
        {
            "http01": {},
            "waitInsteadOfSelfCheck": "30s",
            "selector": {"matchLabels": {"team": "web"}},
        },
        {
            "dns01": {
                "webhook": {
                    "groupName": "acme.example.com",
                    "solverName": "example",
                    "config": {"zone": "example.com"},
                }
            },
            "selector": {"dnsZones": ["example.com"]},
        },
        {
            "dns01": {
                "azureDNS": {
                    "subscriptionID": "sub",
                    "resourceGroupName": "dns",
                    "hostedZoneName": "example.org",
                    "managedIdentity": {"clientID": "11111111-2222-3333-4444-555555555555"},
                },
                "cnameStrategy": "Follow",
            },
            "selector": {"dnsNames": ["www.example.org"]},
        },
    ]
    spec = {"acme": {"server": STAGING, "email": "ops@example.com", "solvers": solvers}}
    Issuer.objects.create(name="kept", kind="acme", spec=json.loads(json.dumps(spec)))
    admin = client_for("admin")
    page = admin.get("/issuers/kept/edit/")
    assert page.status_code == 200
    form = _FormValues()
    form.feed(page.content.decode())
    form.values.pop("csrfmiddlewaretoken", None)
    response = admin.post("/issuers/kept/edit/", form.values)
    assert response.status_code == 302, (
        errors_of(response, "solver-0-type") or response.content[:3000]
    )
    assert Issuer.objects.get(name="kept").spec["acme"]["solvers"] == solvers
