"""Certificate edit (with the re-issue preview), clone, delete and bulk actions in the console."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from issuance.acme import health
from issuance.models import (
    BulkAction,
    BulkItem,
    Certificate,
    CertificateRequest,
    Event,
    Issuer,
    Secret,
)
from issuance.operations import bulk
from issuance.specs.certificate import apply_certificate_ex
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.helpers import drain
from tests.web.builders import ready_certificate

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]
EC = {"algorithm": "ECDSA", "size": 256}


def issued(name: str, issuer: Issuer, **spec: Any) -> Certificate:
    """A certificate the worker has issued (Secret and request stored)."""
    full = {
        "dnsNames": [f"{name}.example.test"],
        "issuerRef": {"name": issuer.name},
        "privateKey": EC,
        "secretName": f"{name}-tls",
        **spec,
    }
    apply_certificate_ex(name, full, actor="test")  # stored as the API stores it (normalized)
    drain()
    cert = Certificate.objects.get(name=name)
    assert cert.revision == 1 and Secret.objects.get(name=cert.secret_name).tls_crt
    return cert


def form_data(cert: Certificate, **changes: str) -> dict[str, str]:
    spec = cert.spec
    data = {
        "issuer": spec["issuerRef"]["name"],
        "dns_names": "\n".join(spec.get("dnsNames", [])),
        "common_name": spec.get("commonName", ""),
        "duration": spec.get("duration", ""),
        "key_algorithm": spec.get("privateKey", {}).get("algorithm", "RSA"),
        "renew_before": spec.get("renewBefore", ""),
    }
    data.update(changes)
    return data


def preview(client: Client, cert: Certificate, **changes: str) -> str:
    response = client.post(
        f"/certificates/{cert.name}/edit/", {**form_data(cert, **changes), "preview": "1"}
    )
    assert response.status_code == 200
    return response.content.decode()


# -- edit ---------------------------------------------------------------------------------------


def test_edit_form_is_prefilled(client_for: ClientFor, issuer: Issuer) -> None:
    issued("web", issuer, renewBefore="720h")
    html = client_for("operator").get("/certificates/web/edit/").content.decode()
    assert "web.example.test</textarea>" in html
    assert 'value="30 days"' in html  # stored as 720h0m0s, shown as people read it
    assert 'value="90 days"' in html
    assert "disabled" in html  # the name cannot be changed


@pytest.mark.parametrize(
    ("changes", "reissues", "words"),
    [
        ({"dns_names": "web.example.test\nwww.example.test"}, True, "dnsNames differ"),
        ({"common_name": "web.example.test"}, True, "commonName differs"),
        ({"key_algorithm": "RSA"}, True, "private key type or size differs"),
        ({"duration": "1440h"}, True, "spec.duration changed"),
        ({"renew_before": "240h"}, False, "only renewBefore changed: no re-issue"),
    ],
)
def test_edit_preview_says_whether_the_change_reissues(
    client_for: ClientFor,
    issuer: Issuer,
    changes: dict[str, str],
    reissues: bool,
    words: str,
) -> None:
    cert = issued("web", issuer)
    html = preview(client_for("operator"), cert, **changes)
    assert f'data-reissue="{"yes" if reissues else "no"}"' in html
    assert words in html, html[html.find("edit-preview") :][:600]
    assert 'id="edit-save"' in html
    # a preview stores nothing
    assert Certificate.objects.get(name="web").generation == cert.generation


def test_edit_preview_of_a_new_issuer_reissues(client_for: ClientFor, issuer: Issuer) -> None:
    cert = issued("web", issuer)
    make_selfsigned_issuer("other")
    html = preview(client_for("operator"), cert, issuer="other")
    assert 'data-reissue="yes"' in html
    assert "issuer changed from selfsigned to other" in html


def test_edit_preview_of_no_change(client_for: ClientFor, issuer: Issuer) -> None:
    cert = issued("web", issuer)
    html = preview(client_for("operator"), cert)
    assert "Nothing changed" in html
    assert 'id="edit-save"' not in html


def test_edit_preview_shows_field_errors_next_to_the_field(
    client_for: ClientFor, issuer: Issuer
) -> None:
    cert = issued("web", issuer)
    html = preview(client_for("operator"), cert, dns_names="web.example.test\nnot a name!")
    assert "DNS name 2: " in html  # the line, in the form's words (not spec.dnsNames[1])
    assert "spec.dnsNames" not in html
    assert 'id="edit-preview"' not in html


def test_edit_saves_what_was_previewed(client_for: ClientFor, issuer: Issuer) -> None:
    cert = issued("web", issuer, usages=["digital signature", "server auth"])
    client = client_for("operator")
    html = preview(client, cert, renew_before="240h")
    digest = html.split('name="previewed" value="')[1].split('"')[0]
    data = {**form_data(cert, renew_before="240h"), "save": "1", "previewed": digest}
    response = client.post("/certificates/web/edit/", data)
    assert response.status_code == 302
    cert.refresh_from_db()
    assert cert.spec["renewBefore"] == "240h0m0s"
    assert cert.spec["usages"] == ["digital signature", "server auth"]  # kept
    assert cert.spec["secretName"] == "web-tls"
    assert cert.generation == 2
    event = Event.objects.get(certificate_name="web", reason="SpecChanged")
    assert event.actor == "operator"
    drain()
    assert CertificateRequest.objects.filter(certificate=cert).count() == 1  # no re-issue


def test_edit_save_with_other_values_than_previewed_previews_again(
    client_for: ClientFor, issuer: Issuer
) -> None:
    cert = issued("web", issuer)
    client = client_for("operator")
    html = preview(client, cert, renew_before="240h")
    digest = html.split('name="previewed" value="')[1].split('"')[0]
    data = {**form_data(cert, dns_names="other.example.test"), "save": "1", "previewed": digest}
    response = client.post("/certificates/web/edit/", data)
    assert response.status_code == 200
    assert 'data-reissue="yes"' in response.content.decode()
    assert Certificate.objects.get(name="web").generation == 1


# -- clone ---------------------------------------------------------------------------------------


def test_clone_prefills_a_new_name_and_copies_the_spec(
    client_for: ClientFor, issuer: Issuer
) -> None:
    issued("web", issuer, usages=["digital signature", "server auth"])
    client = client_for("operator")
    html = client.get("/certificates/web/clone/").content.decode()
    assert 'value="web-copy"' in html
    source = Certificate.objects.get(name="web")
    response = client.post(
        "/certificates/web/clone/", {**form_data(source), "name": "web2", "dns_names": "b.test"}
    )
    assert response.status_code == 302 and response["Location"] == "/certificates/web2/"
    clone = Certificate.objects.get(name="web2")
    assert clone.spec["secretName"] == "web2-tls"
    assert clone.spec["dnsNames"] == ["b.test"]
    assert clone.spec["usages"] == ["digital signature", "server auth"]
    assert clone.spec["privateKey"] == EC
    assert Event.objects.get(certificate_name="web2", reason="Created").actor == "operator"


def test_clone_to_an_existing_name_is_refused(client_for: ClientFor, issuer: Issuer) -> None:
    ready_certificate("web", issuer)
    source = Certificate.objects.get(name="web")
    response = client_for("operator").post(
        "/certificates/web/clone/", {**form_data(source), "name": "web"}
    )
    assert response.status_code == 200
    assert "already exists" in response.content.decode()


# -- delete --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("choice", "secret_left"), [("keep", True), ("remove", False)])
def test_delete_keeps_or_deletes_the_secret(
    client_for: ClientFor, issuer: Issuer, choice: str, secret_left: bool
) -> None:
    issued("web", issuer)
    client = client_for("operator")
    html = client.get("/certificates/web/delete/").content.decode()
    assert "web-tls" in html and "Keep the Secret" in html
    response = client.post("/certificates/web/delete/", {"key_pair": choice})
    assert response.status_code == 302
    assert not Certificate.objects.filter(name="web").exists()
    assert not CertificateRequest.objects.filter(name__startswith="web-").exists()
    assert Secret.objects.filter(name="web-tls").exists() is secret_left
    event = Event.objects.get(certificate_name="web", reason="Deleted")
    assert event.actor == "operator"
    assert ("is kept" in event.message) is secret_left


def test_delete_leaves_a_secret_of_another_certificate(
    client_for: ClientFor, issuer: Issuer
) -> None:
    other = issued("other", issuer)
    make_certificate("web", issuer, secretName="other-tls")  # pointing at someone's Secret
    client_for("operator").post("/certificates/web/delete/", {"key_pair": "remove"})
    assert not Certificate.objects.filter(name="web").exists()
    assert Secret.objects.get(name="other-tls").certificate_id == other.pk


# -- roles ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "approver"])
def test_viewers_see_no_controls_and_get_403(
    client_for: ClientFor, issuer: Issuer, role: str
) -> None:
    cert = ready_certificate("web", issuer)
    client = client_for(role)
    detail = client.get("/certificates/web/").content.decode()
    listing = client.get("/certificates/").content.decode()
    for html in (detail, listing):
        for control in ("edit-link", "clone-link", "delete-link", "bulk-form", "data-select"):
            assert control not in html
    posts = [
        ("/certificates/web/edit/", {**form_data(cert, renew_before="240h"), "save": "1"}),
        ("/certificates/web/clone/", {**form_data(cert), "name": "web2"}),
        ("/certificates/web/delete/", {"key_pair": "remove"}),
        ("/bulk/", {"kind": "delete", "names": ["web"], "confirm": "1"}),
    ]
    for url, data in posts:
        assert client.post(url, data).status_code == 403, url
    assert Certificate.objects.filter(name="web", generation=1).exists()
    assert not Certificate.objects.filter(name="web2").exists()
    assert not BulkAction.objects.exists()


def test_list_has_checkboxes_for_operators(client_for: ClientFor, issuer: Issuer) -> None:
    ready_certificate("web", issuer)
    html = client_for("operator").get("/certificates/").content.decode()
    assert 'id="select-all"' in html
    assert 'name="names" value="web" form="bulk-form"' in html
    partial = client_for("operator").get("/partials/certificates/").content.decode()
    assert 'name="names" value="web"' in partial


def test_list_query_count_does_not_grow_with_rows(client_for: ClientFor, issuer: Issuer) -> None:
    client = client_for("operator")
    counts: list[int] = []
    for n in (3, 30):
        for i in range(len(counts) * 3, n):
            ready_certificate(f"c{i:03d}", issuer)
        client.get("/certificates/")  # warm: session, roles
        health.forget()  # the CA-outage view, cached for a second: read in both counts
        with CaptureQueriesContext(connection) as ctx:
            assert client.get("/certificates/").status_code == 200
        counts.append(len(ctx))
    assert counts[0] == counts[1], counts


# -- bulk ----------------------------------------------------------------------------------------


def start_bulk(client: Client, kind: str, names: list[str], **extra: str) -> BulkAction:
    confirm = client.post("/bulk/", {"kind": kind, "names": names})
    assert confirm.status_code == 200
    assert f"{kind.capitalize()} {len(names)} certificate" in confirm.content.decode()
    assert not BulkAction.objects.exists()  # the confirmation stores nothing
    response = client.post("/bulk/", {"kind": kind, "names": names, "confirm": "1", **extra})
    assert response.status_code == 302
    action = BulkAction.objects.get()
    assert response["Location"] == f"/bulk/{action.id}/"
    return action


def run_steps(client: Client, action: BulkAction) -> list[dict[str, Any]]:
    answers = []
    for _ in range(100):
        response = client.post(f"/bulk/{action.id}/step/", HTTP_X_REQUESTED_WITH="XMLHttpRequest")
        assert response.status_code == 200
        answers.append(response.json())
        if answers[-1]["finished"]:
            return answers
    raise AssertionError("the bulk action did not finish")


def test_bulk_renew_records_one_renewal_per_certificate(
    client_for: ClientFor, issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "CHUNK", 4)
    names = [f"c{i:02d}" for i in range(10)]
    for name in names:
        ready_certificate(name, issuer)
    client = client_for("operator")
    action = start_bulk(client, "renew", [*names, "gone"])
    assert action.total == 11 and action.kind == "renew"
    page = client.get(f"/bulk/{action.id}/").content.decode()
    assert "0/11 done" in page and "data-bulk-step" in page
    answers = run_steps(client, action)
    assert [a["done"] for a in answers] == [4, 8, 11]
    assert answers[-1]["failed"] == 1
    events = Event.objects.filter(reason="ManuallyTriggered", actor="operator")
    assert sorted(events.values_list("certificate_name", flat=True)) == names
    certs = Certificate.objects.filter(name__in=names)
    assert all(c.renew_requested_by == "operator" and c.renew_requested_at for c in certs)
    items = {i.certificate_name: i for i in BulkItem.objects.filter(action=action)}
    assert {i.state for n, i in items.items() if n != "gone"} == {"ok"}
    assert items["gone"].state == "error" and "no certificate named" in items["gone"].message
    page = client.get(f"/bulk/{action.id}/").content.decode()
    assert "11/11 done (100 %)" in page and "1 failed" in page
    assert "data-bulk-step" not in page  # finished: nothing left to drive
    # a step on a finished action changes nothing
    assert run_steps(client, action)[-1]["done"] == 11
    assert events.count() == 10


def test_bulk_delete_with_secrets(client_for: ClientFor, issuer: Issuer) -> None:
    issued("a", issuer)
    issued("b", issuer)
    ready_certificate("keep", issuer)
    client = client_for("operator")
    action = start_bulk(client, "delete", ["a", "b"], key_pair="remove")
    assert action.delete_secrets
    run_steps(client, action)
    assert list(Certificate.objects.values_list("name", flat=True)) == ["keep"]
    assert not Secret.objects.filter(name__in=["a-tls", "b-tls"]).exists()
    assert Event.objects.filter(reason="Deleted", actor="operator").count() == 2


def test_a_bulk_action_cut_off_goes_on_where_it_stopped(
    client_for: ClientFor, issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "CHUNK", 3)
    names = [f"c{i}" for i in range(7)]
    for name in names:
        ready_certificate(name, issuer)
    client = client_for("operator")
    action = start_bulk(client, "renew", names)
    client.post(f"/bulk/{action.id}/step/")  # the no-JavaScript "Continue" button
    action.refresh_from_db()
    assert action.done == 3 and action.finished_at is None
    # ... the tab is closed; later the page is opened again and goes on
    run_steps(client, action)
    events = Event.objects.filter(reason="ManuallyTriggered")
    assert sorted(events.values_list("certificate_name", flat=True)) == names  # once each


def test_someone_elses_bulk_action_is_403(
    client_for: ClientFor, issuer: Issuer, make_user: Callable[..., Any]
) -> None:
    ready_certificate("web", issuer)
    action = bulk.create("renew", ["web"], "someone-else")
    client = client_for("operator")
    assert client.get(f"/bulk/{action.id}/").status_code == 403
    assert client.post(f"/bulk/{action.id}/step/").status_code == 403
    assert client_for("viewer").post(f"/bulk/{action.id}/step/").status_code == 403
    assert not Event.objects.filter(reason="ManuallyTriggered").exists()
    assert client_for("admin").get(f"/bulk/{action.id}/").status_code == 200


@pytest.mark.parametrize("kind", ["renew", "delete"])
def test_bulk_step_queries_do_not_grow_with_the_chunk(
    issuer: Issuer, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.setattr(bulk, "CHUNK", 40)
    counts: list[int] = []
    for n in (4, 40):
        names = [f"n{n}-{i}" for i in range(n)]
        for name in names:
            issued_or_ready = ready_certificate(name, issuer)
            Secret.objects.create(name=issued_or_ready.secret_name, certificate=issued_or_ready)
        action = bulk.create(kind, names, "operator", delete_secrets=True)
        with CaptureQueriesContext(connection) as ctx:
            action = bulk.run_chunk(action.id)
        assert action.done == n and action.failed == 0
        counts.append(len(ctx))
    assert counts[0] == counts[1], counts


def test_bulk_over_every_matching_certificate_on_every_page(
    client_for: ClientFor, issuer: Issuer
) -> None:
    for i in range(55):
        ready_certificate(f"shop{i:02d}", issuer)
    ready_certificate("other", issuer)
    client = client_for("operator")
    listing = client.get("/certificates/?q=shop").content.decode()
    assert "all 55 matching certificates" in listing
    confirm = client.post(
        "/bulk/", {"kind": "renew", "all_matching": "1", "filter": "q=shop", "names": ["shop00"]}
    )
    html = confirm.content.decode()
    assert "Renew 55 certificates" in html
    assert html.count('type="hidden" name="names"') == 55
    assert 'value="other"' not in html


def test_bulk_page_query_count_does_not_grow_with_items(
    client_for: ClientFor, issuer: Issuer
) -> None:
    client = client_for("operator")
    counts: list[int] = []
    for n in (2, 20):
        names = [f"p{n}-{i}" for i in range(n)]
        for name in names:
            ready_certificate(name, issuer)
        action = bulk.create("renew", names, "operator")
        bulk.run_chunk(action.id)
        client.get(f"/bulk/{action.id}/")  # warm
        with CaptureQueriesContext(connection) as ctx:
            page = client.get(f"/bulk/{action.id}/")
        assert page.content.decode().count("data-bulk-item=") == n
        counts.append(len(ctx))
    assert counts[0] == counts[1], counts


def test_api_delete_goes_through_the_same_action_and_keeps_the_secret(
    api_client_for: Callable[[Any], Any], role_users: dict[str, Any], issuer: Issuer
) -> None:
    issued("web", issuer)
    operator = api_client_for(role_users["operator"])
    assert operator.delete("/api/v1/certificates/web/").status_code == 204
    assert not Certificate.objects.filter(name="web").exists()
    assert Secret.objects.filter(name="web-tls").exists()
    event = Event.objects.get(certificate_name="web", reason="Deleted")
    assert (event.actor, event.message) == (
        "operator",
        "Certificate deleted (secret 'web-tls' is kept)",
    )
