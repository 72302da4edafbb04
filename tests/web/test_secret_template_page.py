"""The certificate page shows `spec.secretTemplate` (the exported Secret's labels and
annotations), `spec.otherNames` and the Certificate's own labels, to every role that may
read the certificate."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.test import Client

from issuance.models import Certificate
from issuance.specs import apply_certificate_ex
from tests.factories import make_selfsigned_issuer

pytestmark = pytest.mark.django_db


def cell(page: str, css_class: str) -> str:
    """The text of the <dd class="css_class">, tags and break opportunities removed."""
    found = re.search(rf'<dd class="{css_class}">(.*?)</dd>', page, re.S)
    assert found, f"no {css_class} on the page"
    return re.sub(r"<[^>]+>", "", found.group(1))


def test_page_shows_secret_template_and_other_names(
    client_for: Callable[[str | None], Client],
) -> None:
    make_selfsigned_issuer("ss")
    spec = {
        "commonName": "svc",
        "otherNames": [{"oid": "1.3.6.1.4.1.311.20.2.3", "utf8Value": "svc@example.test"}],
        "issuerRef": {"name": "ss"},
        "secretTemplate": {
            # "items" would be found by the template's own dict lookup: shown as a label.
            "labels": {"items": "x", "team": "payments"},
            "annotations": {"example.test/owner": "ops <on-call>"},
        },
    }
    apply_certificate_ex("svc", spec, actor="test")
    page = client_for("viewer").get("/certificates/svc/").content.decode()
    assert cell(page, "secret-labels") == "items: x, team: payments"
    assert cell(page, "secret-annotations") == "example.test/owner: ops &lt;on-call&gt;"
    assert cell(page, "other-names") == "1.3.6.1.4.1.311.20.2.3 svc@example.test"


def test_page_without_template_has_no_such_rows(
    client_for: Callable[[str | None], Client],
) -> None:
    make_selfsigned_issuer("ss")
    apply_certificate_ex("plain", {"commonName": "p", "issuerRef": {"name": "ss"}}, actor="t")
    page = client_for("viewer").get("/certificates/plain/").content.decode()
    assert 'class="secret-labels"' not in page
    assert 'class="other-names"' not in page
    assert "<dt>Secret</dt>" in page


def test_page_shows_the_certificates_labels_escaped(
    client_for: Callable[[str | None], Client],
) -> None:
    make_selfsigned_issuer("ss")
    labels = {"items": "x", "example.test/team": "pay_ments", "empty": ""}
    apply_certificate_ex(
        "svc", {"commonName": "s", "issuerRef": {"name": "ss"}}, actor="t", labels=labels
    )
    page = client_for("viewer").get("/certificates/svc/").content.decode()
    assert cell(page, "certificate-labels") == "empty: , example.test/team: pay_ments, items: x"
    # Label syntax leaves nothing to escape; the row is escaped all the same (autoescape),
    # so a value stored some other way cannot inject markup.
    Certificate.objects.filter(name="svc").update(labels={"team": "<b>x</b>"})
    page = client_for("viewer").get("/certificates/svc/").content.decode()
    assert cell(page, "certificate-labels") == "team: &lt;b&gt;x&lt;/b&gt;"


def test_page_without_labels_has_no_labels_row(
    client_for: Callable[[str | None], Client],
) -> None:
    make_selfsigned_issuer("ss")
    apply_certificate_ex("plain", {"commonName": "p", "issuerRef": {"name": "ss"}}, actor="t")
    page = client_for("viewer").get("/certificates/plain/").content.decode()
    assert 'class="certificate-labels"' not in page
