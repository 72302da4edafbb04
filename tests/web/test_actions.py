"""Actions from the console: roles are checked on every POST and the actor is recorded."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import Client

from issuance.models import Approval, Certificate, CertificateRequest, Event, Issuer
from tests.web.builders import backoff_certificate, pending_request, ready_certificate

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]


def test_force_renew_is_post_only(client_for: ClientFor, issuer: Issuer) -> None:
    ready_certificate("shop", issuer)
    assert client_for("operator").get("/certificates/shop/renew/").status_code == 405


def test_operator_force_renews_during_backoff(client_for: ClientFor, issuer: Issuer) -> None:
    backoff_certificate("shop", issuer, attempts=3)
    client = client_for("operator")
    response = client.post("/certificates/shop/renew/", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == "/certificates/shop/"
    html = response.content.decode()
    assert "Renewal of shop requested." in html
    cert = Certificate.objects.get(name="shop")
    assert cert.renew_requested_by == "operator"
    assert cert.renew_requested_at is not None
    event = Event.objects.get(certificate_name="shop", reason="ManuallyTriggered")
    assert event.actor == "operator"
    assert "during failure backoff" in event.message
    # the timeline on the page shows who did it
    assert "by operator" in html


def test_force_renew_unknown_certificate_is_404(client_for: ClientFor) -> None:
    assert client_for("operator").post("/certificates/nope/renew/").status_code == 404


def test_approver_approves_with_reason_and_message(client_for: ClientFor, issuer: Issuer) -> None:
    pending_request("csr-1", issuer)
    response = client_for("approver").post(
        "/requests/csr-1/approve/",
        {"reason": "NodeVerified", "message": "checked with the inventory"},
        follow=True,
    )
    assert response.status_code == 200
    assert "CertificateRequest csr-1 approved." in response.content.decode()
    cr = CertificateRequest.objects.get(name="csr-1")
    assert cr.approval == Approval.APPROVED
    assert cr.decided_by == "approver"
    cond = cr.get_condition("Approved")
    assert cond is not None
    assert cond["status"] == "True"
    assert cond["reason"] == "NodeVerified"
    assert cond["message"] == "checked with the inventory"
    assert cond["decidedBy"] == "approver"
    event = Event.objects.get(kind="CertificateRequest", name="csr-1")
    assert event.actor == "approver"
    # the queue no longer lists it
    assert "csr-1" not in client_for("viewer").get("/requests/").content.decode()


def test_approver_denies_with_default_reason(client_for: ClientFor, issuer: Issuer) -> None:
    cert = ready_certificate("shop", issuer)
    pending_request("csr-2", issuer, certificate=cert)
    response = client_for("approver").post(
        "/requests/csr-2/deny/", {"reason": "", "message": "not ours"}
    )
    assert response.status_code == 302
    cr = CertificateRequest.objects.get(name="csr-2")
    assert cr.approval == Approval.DENIED
    cond = cr.get_condition("Denied")
    assert cond is not None
    assert (cond["reason"], cond["message"]) == ("Denied", "not ours")
    assert cr.get_condition("Approved") is None
    # recorded on the owning certificate's timeline
    event = Event.objects.get(certificate_name="shop", reason="Denied")
    assert event.actor == "approver"
    assert event.type == "Warning"


def test_decision_is_final(client_for: ClientFor, issuer: Issuer) -> None:
    pending_request("csr-1", issuer)
    client = client_for("approver")
    client.post("/requests/csr-1/deny/", {"reason": "Nope"})
    response = client.post("/requests/csr-1/approve/", {"reason": "Changed"}, follow=True)
    assert "already Denied by approver" in response.content.decode()
    assert CertificateRequest.objects.get(name="csr-1").approval == Approval.DENIED


def test_invalid_reason_is_refused_and_nothing_changes(
    client_for: ClientFor, issuer: Issuer
) -> None:
    pending_request("csr-1", issuer)
    response = client_for("approver").post(
        "/requests/csr-1/approve/", {"reason": "two words"}, follow=True
    )
    assert "csr-1: reason: use a CamelCase word" in response.content.decode()
    assert CertificateRequest.objects.get(name="csr-1").approval == Approval.PENDING


def test_new_certificate_form_for_operators(client_for: ClientFor, issuer: Issuer) -> None:
    assert client_for("viewer").get("/new-certificate/").status_code == 403
    assert client_for("viewer").post("/new-certificate/", {"name": "x"}).status_code == 403
    client = client_for("operator")
    page = client.get("/new-certificate/")
    assert page.status_code == 200
    assert b'<option value="selfsigned">' in page.content
    response = client.post(
        "/new-certificate/",
        {
            "name": "blog",
            "issuer": "selfsigned",
            "dns_names": "blog.example.test\nwww.blog.example.test",
            "common_name": "",
            "duration": "720h",
            "key_algorithm": "ECDSA",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == "/certificates/blog/"
    cert = Certificate.objects.get(name="blog")
    assert cert.dns_names == ["blog.example.test", "www.blog.example.test"]
    assert cert.issuer == issuer
    assert Event.objects.get(certificate_name="blog", reason="Created").actor == "operator"


def test_new_certificate_form_reports_spec_errors(client_for: ClientFor, issuer: Issuer) -> None:
    client = client_for("operator")
    data = {
        "name": "bad",
        "issuer": "selfsigned",
        "dns_names": "not a name!",
        "duration": "forever",
        "key_algorithm": "RSA",
    }
    response = client.post("/new-certificate/", data)
    assert response.status_code == 200
    html = response.content.decode()
    # Each error beside its field, in the form's words (no spec paths such as spec.dnsNames).
    assert "spec." not in html
    assert "not a valid DNS name" in html or "DNS name" in html
    assert "&#x27;forever&#x27; is not a length of time: write it like 90d, 90 days" in html
    assert not Certificate.objects.filter(name="bad").exists()

    ready_certificate("taken", issuer)
    response = client.post(
        "/new-certificate/",
        {**data, "name": "taken", "dns_names": "a.test", "duration": "90 days"},
    )
    assert "already exists" in response.content.decode()
