"""The approval policy editor (preview, errors, save) and the audit log (filters, paging,
links, CSV export) in a real Chromium, plus a viewer who sees no edit controls and whose
crafted POST is refused."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import CertificateRequest, Event, Issuer
from issuance.specs.issuer import apply_issuer
from tests.browser.a11y import check_page
from tests.browser.pages import login
from tests.factories import csr_pem, make_certificate

pytestmark = [pytest.mark.browser, pytest.mark.timeout(180)]

NewPage = Callable[[], Any]

RULES = """requesterPattern: 'system:node:[a-z0-9-]+'
commonNameMustMatchRequester: true
dnsSanRegex: '[a-z0-9-*.]+\\.nodes\\.example\\.test'
maxDnsSans: 2
"""
DENY = """- name: no-wildcards
  message: wildcard certificates are never issued to nodes
  dnsSanRegex: '\\*\\..*'
"""


def crafted_post(page: Any, url: str, body: str) -> int:
    """A POST the page does not offer, with a valid CSRF token: only the role check is left."""
    return int(
        page.evaluate(
            """async ([url, body]) => {
                const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
                const r = await fetch(url, {method: 'POST', body: body, headers: {
                  'X-CSRFToken': token, 'Content-Type': 'application/x-www-form-urlencoded'}});
                return r.status;
            }""",
            [url, body],
        )
    )


@pytest.fixture
def nodes(db: None) -> Issuer:
    issuer, _ = apply_issuer(
        "nodes", {"selfSigned": {}, "approvalPolicy": {"autoApprove": "none"}}, actor="test"
    )
    return issuer


def test_policy_editor_preview_errors_save_and_viewer(
    new_page: NewPage, role_users: dict[str, User], nodes: Issuer
) -> None:
    page = new_page()
    login(page, "admin")
    page.goto("/issuers/")
    page.locator("tr[data-issuer=nodes] a", has_text="Approval policy").click()
    page.wait_for_url(re.compile(r"/issuers/nodes/policy/$"))
    assert page.locator("#id_auto_approve").input_value() == "none"
    page.select_option("#id_auto_approve", "all")
    page.fill("#id_rules", RULES)
    page.fill("#id_deny", DENY)

    # Preview with the edited, unsaved policy: an approving CSR, every check shown.
    page.fill("#id_csr", csr_pem("node-1.nodes.example.test", common_name="system:node:node-1"))
    page.fill("#id_requester", "system:node:node-1")
    page.click("#policy-preview-button")
    outcome = page.locator("#policy-outcome")
    outcome.wait_for()
    assert outcome.inner_text() == "approve"
    checks = page.locator("#policy-preview li[data-check]")
    assert checks.count() == 5
    assert page.locator("#policy-preview li[data-passed=false]").count() == 0
    # The edited policy is still in the boxes after the preview.
    assert "no-wildcards" in page.locator("#id_deny").input_value()
    check_page(page, "policy-preview-approve")

    # A wildcard: the deny rule decides.
    page.fill("#id_csr", csr_pem("*.nodes.example.test", common_name="system:node:node-1"))
    page.click("#policy-preview-button")
    page.locator("#policy-outcome", has_text="deny").wait_for()
    failed = page.locator("#policy-preview li[data-passed=false]")
    assert failed.count() == 1 and "deny:no-wildcards" in failed.inner_text()
    assert "wildcard certificates are never issued" in page.locator("#policy-preview").inner_text()
    # Nothing was stored by either preview.
    nodes.refresh_from_db()
    assert nodes.generation == 1 and nodes.spec["approvalPolicy"] == {"autoApprove": "none"}
    assert not CertificateRequest.objects.exists()

    # Save with a mistake: the spec layer's error is shown next to the rules box.
    page.fill("#id_rules", RULES + "maxExpirationSeconds: 5\n")
    page.click("#policy-save")
    errors = page.locator("#errors-rules")
    errors.wait_for()
    assert "spec.approvalPolicy.rules.maxExpirationSeconds" in errors.inner_text()
    assert page.locator("#id_rules").get_attribute("aria-invalid") == "true"
    check_page(page, "policy-error")
    page.fill("#id_rules", RULES)
    page.click("#policy-save")
    page.locator(".messages", has_text="saved (generation 2)").wait_for()
    nodes.refresh_from_db()
    assert nodes.spec["approvalPolicy"]["autoApprove"] == "all"
    assert nodes.spec["approvalPolicy"]["deny"][0]["name"] == "no-wildcards"

    # A viewer reads the policy, has no buttons, and a crafted save is refused.
    viewer = new_page()
    login(viewer, "viewer")
    viewer.goto("/issuers/nodes/policy/")
    assert "no-wildcards" in viewer.locator("#id_deny").input_value()
    assert viewer.locator("#policy-save").count() == 0
    assert viewer.locator("#policy-preview-button").count() == 0
    assert viewer.locator("#id_deny").get_attribute("readonly") is not None
    assert viewer.locator("#id_auto_approve").is_disabled()
    assert crafted_post(viewer, "/issuers/nodes/policy/", "auto_approve=none") == 403
    assert crafted_post(viewer, "/issuers/nodes/policy/preview/", "csr=x") == 403
    nodes.refresh_from_db()
    assert nodes.generation == 2


def test_audit_log_filters_paging_links_and_export(
    new_page: NewPage, role_users: dict[str, User], nodes: Issuer, tmp_path: Path
) -> None:
    make_certificate("web", nodes)
    t0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    for i in range(60):
        Event.objects.create(
            kind="Certificate",
            name="web",
            certificate_name="web",
            reason="ManuallyTriggered",
            actor="alice",
            message=f"renew {i}",
            created_at=t0 + timedelta(minutes=i),
        )
    Event.objects.create(
        kind="CertificateRequest",
        name="node-1-csr",
        reason="Denied",
        actor="=cmd|' /C calc'!A0",
        message="-not ours",
        created_at=t0 + timedelta(hours=2),
    )
    page = new_page()
    login(page, "viewer")
    page.click("nav.mainnav >> text=Audit log")
    page.wait_for_url(re.compile(r"/audit/$"))
    page.fill("#audit-filters input[name=actor]", "alice")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_url(re.compile(r"actor=alice"))
    rows = page.locator("#audit-table tbody tr")
    assert rows.count() == 50
    assert "renew 59" in rows.first.inner_text()
    check_page(page, "audit-log")
    page.click("#audit-table a[rel=next]")
    page.wait_for_url(re.compile(r"before="))
    assert rows.count() == 10 and "renew 9" in rows.first.inner_text()
    assert page.locator("#audit-table a[rel=next]").count() == 0
    page.click("#audit-table a[rel=prev]")
    page.wait_for_url(re.compile(r"after="))
    assert rows.count() == 50 and "renew 59" in rows.first.inner_text()

    # Kind and time range; the row links to its resource's page.
    page.goto("/audit/")
    page.select_option("#audit-filters select[name=kind]", "Certificate")
    page.fill("#audit-filters input[name=actor]", "alice")
    page.fill("#audit-filters input[name=since]", "2026-03-01T12:10")
    page.fill("#audit-filters input[name=until]", "2026-03-01T12:15")
    page.click("#audit-filters button[type=submit]")
    page.wait_for_url(re.compile(r"since="))
    assert [r.split("\t")[-1] for r in rows.all_inner_texts()] == [
        f"renew {i}" for i in range(14, 9, -1)
    ]

    # The export carries the same filters.
    with page.expect_download() as download:
        page.click("#audit-export")
    saved = tmp_path / "audit.csv"
    download.value.save_as(saved)
    lines = list(csv.reader(io.StringIO(saved.read_text())))
    assert lines[0][:3] == ["time", "type", "kind"]
    assert [r[7] for r in lines[1:]] == [f"renew {i}" for i in range(14, 9, -1)]
    assert all(r[8].endswith("/certificates/web/") for r in lines[1:])

    # A hostile actor is escaped in the export too.
    page.goto("/audit/?reason=Denied")
    with page.expect_download() as download:
        page.click("#audit-export")
    download.value.save_as(saved)
    denied = list(csv.reader(io.StringIO(saved.read_text())))[1]
    assert denied[6] == "'=cmd|' /C calc'!A0" and denied[7] == "'-not ours"

    page.goto("/audit/?actor=alice")
    page.locator("#audit-table tbody tr a", has_text="web").first.click()
    page.wait_for_url(re.compile(r"/certificates/web/$"))
