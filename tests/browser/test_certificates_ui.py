"""Certificate edit (with the re-issue preview), clone, delete, and select-all + bulk renew
with live progress, in a real Chromium against the real app (web + worker)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import BulkAction, Certificate, CertificateRequest, Event, Secret
from issuance.specs.certificate import apply_certificate
from issuance.specs.issuer import apply_issuer
from tests.browser.a11y import check_page
from tests.browser.pages import login
from tests.helpers import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]


@pytest.fixture(autouse=True)
def app(server: str) -> str:
    return server


def issued(*names: str) -> None:
    """Certificates of a self-signed issuer, issued by the app's worker."""
    apply_issuer("selfsigned", {"selfSigned": {}}, actor="test")
    for name in names:
        spec = {
            "secretName": f"{name}-tls",
            "dnsNames": [f"{name}.example.test"],
            "issuerRef": {"name": "selfsigned"},
            "privateKey": {"algorithm": "ECDSA", "size": 256},
        }
        apply_certificate(name, spec, actor="test")
    wait_for(
        lambda: Certificate.objects.filter(name__in=names, revision=1).count() == len(names),
        60,
        "the worker issued the certificates",
    )


def test_edit_with_preview_clone_and_delete(new_page: NewPage, role_users: dict[str, User]) -> None:
    issued("web")
    page = new_page()
    login(page, "operator")
    page.goto("/certificates/web/")
    page.click("#edit-link")
    page.wait_for_url(re.compile(r"/certificates/web/edit/$"))
    assert page.locator("#id_name").is_disabled()

    # Only renewBefore: the preview says no re-issue; nothing is saved yet.
    page.fill("#id_renew_before", "240h")
    page.click("button[name=preview]")
    preview = page.locator("#edit-preview")
    assert preview.get_attribute("data-reissue") == "no"
    assert "only renewBefore changed: no re-issue" in preview.inner_text()
    assert Certificate.objects.get(name="web").generation == 1

    # A new DNS name: the preview says a new certificate will be issued, and why.
    page.fill("#id_dns_names", "web.example.test\nwww.example.test")
    page.click("button[name=preview]")
    assert page.locator("#edit-preview").get_attribute("data-reissue") == "yes"
    assert "dnsNames differ" in page.locator("#edit-preview").inner_text()
    check_page(page, "certs-edit-preview")
    page.click("#edit-save")
    page.wait_for_url(re.compile(r"/certificates/web/$"))
    assert "a new certificate will be issued" in page.locator(".messages").inner_text()
    wait_for(
        lambda: Certificate.objects.filter(name="web", revision=2).exists(),
        60,
        "the worker re-issued web",
    )
    assert Event.objects.get(certificate_name="web", reason="SpecChanged").actor == "operator"

    # Clone: the create form prefilled, with a new name.
    page.click("#clone-link")
    assert page.locator("#id_name").input_value() == "web-copy"
    assert "www.example.test" in page.locator("#id_dns_names").input_value()
    page.fill("#id_name", "web2")
    page.click("button[type=submit].primary")
    page.wait_for_url(re.compile(r"/certificates/web2/$"))
    assert Certificate.objects.get(name="web2").spec["secretName"] == "web2-tls"

    # Delete web, keeping its Secret (the default choice).
    page.goto("/certificates/web/")
    page.click("#delete-link")
    assert page.locator("input[name=key_pair][value=keep]").is_checked()
    check_page(page, "certs-delete")
    page.click("#delete-submit")  # data-confirm: the page's dialog handler accepts
    page.wait_for_url(re.compile(r"/certificates/$"))
    assert not Certificate.objects.filter(name="web").exists()
    assert Secret.objects.filter(name="web-tls").exists()

    # A viewer sees none of the controls, and a crafted POST is refused.
    viewer = new_page()
    login(viewer, "viewer")
    viewer.goto("/certificates/web2/")
    assert viewer.locator("#edit-link, #clone-link, #delete-link").count() == 0
    viewer.goto("/certificates/")
    assert viewer.locator("#bulk-form, #select-all").count() == 0
    token = next(c["value"] for c in viewer.context.cookies() if c["name"] == "csrftoken")
    response = viewer.request.post(
        "/certificates/web2/delete/",
        form={"key_pair": "remove", "csrfmiddlewaretoken": token},
        headers={"X-CSRFToken": token, "Referer": viewer.url},
    )
    assert response.status == 403
    assert Certificate.objects.filter(name="web2").exists()


def test_select_all_and_bulk_renew_with_live_progress(
    new_page: NewPage, role_users: dict[str, User]
) -> None:
    names = [f"bulk{i:02d}" for i in range(30)]
    issued(*names)
    page = new_page()
    # Every live message the page gets, from its first load on.
    page.add_init_script(
        "window.__live = []; document.addEventListener('live:message',"
        " e => window.__live.push(e.detail));"
    )
    login(page, "operator")
    page.goto("/certificates/")
    page.locator("#live-status[data-state=live]").wait_for()
    # Keyboard: Tab-reachable checkboxes, Space toggles select-all.
    page.focus("#select-all")
    page.keyboard.press("Space")
    assert page.locator("#bulk-count").inner_text() == "30 selected"
    assert page.locator("input[data-select-row]:checked").count() == 30
    page.locator("input[data-select-row][value=bulk00]").press("Space")  # one off again
    assert page.locator("#bulk-count").inner_text() == "29 selected"
    assert page.evaluate("document.getElementById('select-all').indeterminate")
    page.locator("input[data-select-row][value=bulk00]").press("Space")
    check_page(page, "certs-list-selected")
    page.click("button[data-bulk-button][value=renew]")
    assert "Renew 30 certificates" in page.locator("h1").inner_text()
    page.click("#bulk-confirm-submit")
    page.wait_for_url(re.compile(r"/bulk/[0-9a-f-]+/$"))

    page.locator("#bulk-state[data-finished=yes]").wait_for(timeout=60_000)
    page.wait_for_function(
        # A function: an expression would be eval'ed, which the console's CSP refuses.
        "() => document.querySelectorAll('tr[data-bulk-item]').length === 30",
        timeout=15_000,
    )
    assert "30/30 done (100 %)" in page.locator("#bulk-count").inner_text()
    assert page.locator("tr[data-bulk-item][data-state=ok]").count() == 30
    check_page(page, "certs-bulk-done")
    # The progress came over the WebSocket, chunk by chunk (20, then 30).
    progress = page.evaluate("window.__live.filter(m => m.type === 'bulk.progress')")
    assert [m["done"] for m in progress] == [20, 30]
    assert progress[-1]["finished"] is True

    action = BulkAction.objects.get()
    assert (action.done, action.failed, action.actor) == (30, 0, "operator")
    assert Event.objects.filter(reason="ManuallyTriggered", actor="operator").count() == 30
    wait_for(
        lambda: (
            CertificateRequest.objects.filter(certificate__name__in=names, revision=2).count() == 30
        ),
        90,
        "the worker renewed every selected certificate",
    )
