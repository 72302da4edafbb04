"""The approval policy editor: save through the issuer spec layer (field errors next to the
box they concern), the CSR preview with the real decision function (nothing stored), roles."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client
from pytest_django import DjangoAssertNumQueries

from issuance.models import CertificateRequest, Event, Issuer
from issuance.specs.issuer import apply_issuer
from issuance.specs.secret_refs import read_secret_value
from tests.factories import csr_pem

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]
URL = "/issuers/nodes/policy/"
PREVIEW = "/issuers/nodes/policy/preview/"

RULES = """requesterPattern: 'system:node:[a-z0-9-]+'
commonNameMustMatchRequester: true
dnsSanRegex: '[a-z0-9-*.]+\\.nodes\\.example\\.test'
maxDnsSans: 2
"""
DENY = """- name: no-wildcards
  message: wildcard certificates are never issued to nodes
  dnsSanRegex: '\\*\\..*'
"""


@pytest.fixture
def nodes(db: None) -> Issuer:
    issuer, _ = apply_issuer(
        "nodes",
        {"selfSigned": {}, "approvalPolicy": {"autoApprove": "none"}},
        actor="test",
    )
    return issuer


def form(auto: str = "", rules: str = RULES, deny: str = DENY, **extra: Any) -> dict[str, Any]:
    return {"auto_approve": auto, "rules": rules, "deny": deny, **extra}


def errors_of(html: str, box: str) -> str:
    found = re.search(rf'<ul class="errorlist" id="errors-{box}">(.*?)</ul>', html, re.S)
    return found.group(1) if found else ""


def checks_of(html: str) -> dict[str, bool]:
    return {
        name: passed == "true"
        for name, passed in re.findall(r'data-check="([^"]+)" data-passed="(true|false)"', html)
    }


def outcome_of(html: str) -> str:
    found = re.search(r'id="policy-outcome">(\w+)<', html)
    return found.group(1) if found else ""


# -- viewing ------------------------------------------------------------------------------


def test_the_page_shows_the_stored_policy_and_controls_by_role(
    client_for: ClientFor, nodes: Issuer
) -> None:
    apply_issuer(
        "nodes",
        {"selfSigned": {}, "approvalPolicy": {"autoApprove": "all", "rules": {"maxDnsSans": 3}}},
        actor="test",
    )
    viewer = client_for("viewer").get(URL).content.decode()
    assert '<option value="all" selected>' in viewer
    assert "maxDnsSans: 3" in viewer
    assert 'id="policy-save"' not in viewer and 'id="policy-preview-button"' not in viewer
    assert viewer.count(" readonly>") == 2 and " disabled>" in viewer
    operator = client_for("operator").get(URL).content.decode()
    assert 'id="policy-preview-button"' in operator and 'id="policy-save"' not in operator
    assert " readonly>" not in operator
    admin = client_for("admin").get(URL).content.decode()
    assert 'id="policy-preview-button"' in admin and 'id="policy-save"' in admin
    # The issuers page links every issuer to its editor.
    assert 'href="/issuers/nodes/policy/"' in client_for("viewer").get("/issuers/").content.decode()


def test_roles(client_for: ClientFor, nodes: Issuer) -> None:
    assert client_for(None).get(URL).status_code == 302  # → login
    assert client_for("nobody").get(URL).status_code == 403
    for role in ("viewer", "operator", "approver"):
        assert client_for(role).post(URL, form()).status_code == 403, role
    assert client_for("viewer").post(PREVIEW, form(csr=csr_pem())).status_code == 403
    assert client_for("nobody").post(PREVIEW, form(csr=csr_pem())).status_code == 403
    assert client_for("approver").post(PREVIEW, form(csr=csr_pem())).status_code == 200
    assert client_for("operator").get(PREVIEW).status_code == 405
    assert client_for("admin").get("/issuers/missing/policy/").status_code == 404
    nodes.refresh_from_db()
    assert nodes.generation == 1 and nodes.spec["approvalPolicy"] == {"autoApprove": "none"}


# -- saving -------------------------------------------------------------------------------


def test_save_applies_through_the_spec_layer(client_for: ClientFor, nodes: Issuer) -> None:
    admin = client_for("admin")
    response = admin.post(URL, form(auto="all"))
    assert response.status_code == 302 and response["Location"] == URL
    nodes.refresh_from_db()
    policy = nodes.spec["approvalPolicy"]
    assert policy["autoApprove"] == "all"
    assert policy["rules"]["maxDnsSans"] == 2
    assert policy["deny"][0]["name"] == "no-wildcards"
    assert nodes.spec["selfSigned"] == {}  # the rest of the spec is kept
    assert nodes.generation == 2
    event = Event.objects.filter(kind="Issuer", name="nodes", reason="SpecChanged").get()
    assert event.actor == "admin"
    assert "spec.approvalPolicy" in event.message and "generation 2" in event.message
    assert "saved (generation 2)" in admin.get(URL).content.decode()

    # The same again: nothing changes, no event.
    client_for("admin").post(URL, form(auto="all"))
    nodes.refresh_from_db()
    assert nodes.generation == 2
    assert Event.objects.filter(reason="SpecChanged").count() == 1

    # Empty boxes and no autoApprove remove the policy.
    client_for("admin").post(URL, form(rules="", deny=""))
    nodes.refresh_from_db()
    assert "approvalPolicy" not in nodes.spec and nodes.generation == 3


def test_saving_keeps_an_acme_issuers_encrypted_secrets(client_for: ClientFor) -> None:
    apply_issuer(
        "nodes",
        {
            "acme": {
                "server": "https://acme.example.test/dir",
                "externalAccountBinding": {"keyID": "k0", "hmacKey": "Zmlyc3Qta2V5"},
            }
        },
        actor="test",
    )
    response = client_for("admin").post(URL, form())
    assert response.status_code == 302
    issuer = Issuer.objects.get(name="nodes")
    assert issuer.spec["acme"]["externalAccountBinding"]["keySecretRef"]["name"] == "nodes-eab"
    assert "Zmlyc3Qta2V5" not in str(issuer.spec)
    assert read_secret_value("nodes-eab", "secret") == "Zmlyc3Qta2V5"
    assert issuer.spec["approvalPolicy"]["rules"]["maxDnsSans"] == 2
    page = client_for("admin").get(URL).content.decode()
    assert "Zmlyc3Qta2V5" not in page


@pytest.mark.parametrize(
    ("data", "box", "words"),
    [
        (
            form(rules="requesterPattern: '('\n"),
            "rules",
            "spec.approvalPolicy.rules.requesterPattern: not a valid regular expression",
        ),
        (form(rules="maxDnsSans: -1\n"), "rules", "spec.approvalPolicy.rules.maxDnsSans"),
        (form(rules="nope: 1\n"), "rules", "spec.approvalPolicy.rules.nope"),
        (form(rules="a: [\n"), "rules", "not valid YAML"),
        (form(deny="- dnsSanRegex: x\n"), "deny", "spec.approvalPolicy.deny[0].name: is required"),
        (form(deny="name: x\n"), "deny", "spec.approvalPolicy.deny: must be a list"),
        (
            form(deny="- name: a\n  ipSanCidrs: [nonsense]\n"),
            "deny",
            "spec.approvalPolicy.deny[0].ipSanCidrs[0]: not a CIDR",
        ),
        (form(auto="sometimes"), "auto_approve", "Select a valid choice"),
    ],
)
def test_field_errors_are_shown_next_to_their_box(
    client_for: ClientFor, nodes: Issuer, data: dict[str, Any], box: str, words: str
) -> None:
    response = client_for("admin").post(URL, {**data, "csr": "typed before saving"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "typed before saving" in html and 'id="errors-csr"' not in html
    assert words in errors_of(html, box)
    assert f'aria-describedby="errors-{box}"' in html
    # What was typed is kept in the box.
    if data[box]:
        assert data[box].split("\n")[0].split(":")[0] in html
    nodes.refresh_from_db()
    assert nodes.generation == 1
    assert not Event.objects.filter(reason="SpecChanged").exists()


# -- preview ------------------------------------------------------------------------------

NODE_CSR_FIELDS = {"requester": "system:node:node-1", "groups": "system:nodes"}


def _stored() -> tuple[int, int, Any]:
    issuer = Issuer.objects.get(name="nodes")
    return Event.objects.count(), CertificateRequest.objects.count(), issuer.spec


def test_preview_approves_with_each_check_and_stores_nothing(
    client_for: ClientFor, nodes: Issuer
) -> None:
    before = _stored()
    csr = csr_pem("node-1.nodes.example.test", common_name="system:node:node-1")
    # autoApprove is "none" in the stored policy; the edited one (unsaved) decides.
    response = client_for("operator").post(PREVIEW, form(auto="all", csr=csr, **NODE_CSR_FIELDS))
    assert response.status_code == 200
    html = response.content.decode()
    assert outcome_of(html) == "approve"
    assert "all 4 approval checks passed" in html
    assert checks_of(html) == {
        "requesterPattern": True,
        "commonNameMustMatchRequester": True,
        "dnsSanRegex": True,
        "maxDnsSans": True,
        "deny:no-wildcards": True,
    }
    assert "CN=system:node:node-1" in html
    # The edited boxes and the CSR stay in the form.
    assert "no-wildcards" in html and "BEGIN CERTIFICATE REQUEST" in html
    assert _stored() == before


def test_preview_denies_and_pends_with_the_failing_checks(
    client_for: ClientFor, nodes: Issuer
) -> None:
    before = _stored()
    client = client_for("approver")
    wildcard = csr_pem("*.nodes.example.test", common_name="system:node:node-1")
    html = client.post(PREVIEW, form(csr=wildcard, **NODE_CSR_FIELDS)).content.decode()
    assert outcome_of(html) == "deny"
    assert "deny rule &#x27;no-wildcards&#x27;: wildcard certificates are never issued" in html
    assert checks_of(html)["deny:no-wildcards"] is False

    other = csr_pem("a.nodes.example.test", "b.nodes.example.test", "c.nodes.example.test")
    html = client.post(
        PREVIEW, form(csr=other, requester="system:node:node-1", expiration_seconds="3600")
    ).content.decode()
    assert outcome_of(html) == "pending"
    checks = checks_of(html)
    assert checks["maxDnsSans"] is False and checks["commonNameMustMatchRequester"] is False
    assert checks["requesterPattern"] is True
    assert "3 DNS names (at most 2 allowed)" in html
    assert _stored() == before


def test_preview_of_an_invalid_policy_or_csr_shows_errors(
    client_for: ClientFor, nodes: Issuer
) -> None:
    client = client_for("operator")
    html = client.post(PREVIEW, form(rules="maxDnsSans: many\n", csr=csr_pem())).content.decode()
    assert "spec.approvalPolicy.rules.maxDnsSans" in errors_of(html, "rules")
    assert 'id="policy-outcome"' not in html
    html = client.post(PREVIEW, form(csr="not a csr")).content.decode()
    assert "not a readable CSR" in errors_of(html, "csr")
    assert 'id="policy-outcome"' not in html
    html = client.post(PREVIEW, form(csr=csr_pem(), expiration_seconds="soon")).content.decode()
    assert "Enter a whole number" in html and 'id="policy-outcome"' not in html


def test_editor_query_count_is_bounded(
    client_for: ClientFor, nodes: Issuer, django_assert_max_num_queries: DjangoAssertNumQueries
) -> None:
    client = client_for("admin")
    client.get(URL)  # session warm-up
    with django_assert_max_num_queries(5):
        assert client.get(URL).status_code == 200
    with django_assert_max_num_queries(5):
        client.post(PREVIEW, form(csr=csr_pem("x.nodes.example.test"), **NODE_CSR_FIELDS))


def test_an_edit_of_an_older_generation_is_refused(client_for: ClientFor, nodes: Issuer) -> None:
    admin = client_for("admin")
    assert 'name="generation" value="1"' in admin.get(URL).content.decode()
    # Someone else changes the issuer meanwhile (here through the spec layer, as the API).
    apply_issuer("nodes", {"selfSigned": {"maxDuration": "24h"}}, actor="someone")
    response = admin.post(URL, form(generation="1"))
    assert response.status_code == 400
    general = re.search(r'id="errors-general">(.*?)</ul>', response.content.decode(), re.S)
    assert general is not None and "generation 1, now 2" in general.group(1)
    nodes.refresh_from_db()
    assert nodes.generation == 2 and "approvalPolicy" not in nodes.spec
    # With the current generation it is saved, and the other change is kept.
    assert admin.post(URL, form(generation="2")).status_code == 302
    nodes.refresh_from_db()
    assert nodes.generation == 3
    assert nodes.spec["selfSigned"] == {"maxDuration": "24h0m0s"}
    assert nodes.spec["approvalPolicy"]["deny"][0]["name"] == "no-wildcards"


def test_hostile_policy_text_is_escaped(client_for: ClientFor, nodes: Issuer) -> None:
    script = "<script>alert(1)</script>"
    deny = f"- name: x\n  message: '{script}'\n  requesterPattern: '.*'\n"
    assert client_for("admin").post(URL, form(deny=deny)).status_code == 302
    html = client_for("operator").get(URL).content.decode()
    assert script not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    preview = client_for("operator").post(PREVIEW, form(deny=deny, csr=csr_pem()))
    assert script not in preview.content.decode()
    assert outcome_of(preview.content.decode()) == "deny"
