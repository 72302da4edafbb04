"""The Clusters page and the mirrored objects in a real browser: every new page accessible
(axe-core, light and dark, desktop and phone, no sideways scrolling), adding a cluster
with the contexts offered from the pasted kubeconfig, the next-retry countdown ticking,
and a scoped user's view. The live update of a mirrored Certificate changed in a real
cluster is the lead's end-to-end test (stable ids on the detail page: mirrored-ready,
mirrored-reason, mirrored-next-retry)."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from issuance.models import Cluster, ClusterAction, MirroredKind
from issuance.models.cluster import ClusterState
from tests.browser.a11y import (
    DESKTOP,
    FAILING_IMPACTS,
    PHONE,
    assert_no_horizontal_overflow,
    axe_violations,
    format_violations,
    screenshots,
)
from tests.browser.pages import login, login_with
from tests.factories import scoped_user
from tests.web.mirror_builders import (
    TOKEN,
    child,
    event,
    failing_cert,
    kubeconfig_text,
    make_cluster,
    pending_cr,
    ready_cert,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]
CERT_URL = "/clusters/prod/team-a/certificates/web/"


@pytest.fixture
def mirror_data(db: None) -> Cluster:
    prod = make_cluster(
        "prod",
        state=ClusterState.CONNECTED,
        last_sync=timezone.now(),
        checked_at=timezone.now(),
        api_versions=["cert-manager.io/v1", "acme.cert-manager.io/v1"],
        missing_permissions=[
            "approve signers.cert-manager.io",
            "patch certificates/status.cert-manager.io",
        ],
        last_error="",
    )
    make_cluster(
        "staging", state=ClusterState.UNREACHABLE, last_error="dial tcp: connection refused"
    )
    # The next retry 90 s away, so the countdown visibly ticks in seconds.
    failed_at = timezone.now() - timedelta(hours=4) + timedelta(seconds=90)
    cert = failing_cert(prod, "team-a", "web", attempts=3, failed_at=failed_at)
    ready_cert(prod, "team-a", "shop-with-a-rather-long-name-for-the-phone-layout")
    ready_cert(prod, "team-b", "other-team")
    cr = pending_cr(prod, "team-a", "web-1", "web")
    child(prod, MirroredKind.ORDER, "team-a", "web-1-2751391425", "web", state="pending")
    challenge = child(prod, MirroredKind.CHALLENGE, "team-a", "web-1-2751391425-0", "web")
    event(prod, cert, "Issuing", "Issuing certificate as Secret does not exist")
    event(prod, cr, "OrderCreated", "Created Order resource team-a/web-1-2751391425")
    event(prod, challenge, "Presented", "Presented challenge using HTTP-01 challenge mechanism")
    return prod


def _check(page: Any, name: str, failures: list[str]) -> None:
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
            page.set_viewport_size(size)
            failing = [v for v in axe_violations(page) if v["impact"] in FAILING_IMPACTS]
            if failing:
                failures.append(f"{name} ({scheme}, {label}):\n{format_violations(failing)}")
            if label == "phone":
                try:
                    assert_no_horizontal_overflow(page)
                except AssertionError as exc:
                    failures.append(f"{name} ({scheme}, {label}): {exc}")
        screenshots(page, name if scheme == "light" else f"{name}-dark")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(DESKTOP)


def test_cluster_pages_accessible(
    new_page: NewPage, role_users: dict[str, User], mirror_data: Cluster
) -> None:
    page = new_page()
    login(page, "admin")
    failures: list[str] = []
    for name, path in (
        ("clusters", "/clusters/"),
        ("cluster-detail", "/clusters/prod/"),
        ("cluster-add", "/new-cluster/"),
        ("cluster-edit", "/clusters/prod/edit/"),
        ("cluster-delete", "/clusters/prod/delete/"),
        ("mirrored-certificate", CERT_URL),
        ("mirrored-request", "/clusters/prod/team-a/certificaterequests/web-1/"),
        ("mirrored-order", "/clusters/prod/team-a/orders/web-1-2751391425/"),
        ("certificates-with-mirrored", "/certificates/"),
        ("requests-with-mirrored", "/requests/"),
        ("dashboard-with-clusters", "/"),
    ):
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        page.wait_for_load_state("load")
        _check(page, name, failures)
    # The add form with its errors shown next to the fields.
    page.goto("/new-cluster/")
    page.fill("#id_name", "broken")
    page.fill("#id_kubeconfig", "clusters: [")
    page.click("#save-cluster")
    page.wait_for_selector("#id_kubeconfig[aria-invalid=true]")
    _check(page, "cluster-add-errors", failures)
    assert not failures, "\n\n".join(failures)


def test_admin_adds_a_cluster_with_the_offered_context(
    new_page: NewPage, role_users: dict[str, User], mirror_data: Cluster
) -> None:
    page = new_page()
    login(page, "admin")
    page.goto("/clusters/")
    page.click("#add-cluster")
    page.fill("#id_name", "edge")
    page.fill("#id_kubeconfig", kubeconfig_text("edge-admin", "edge-readonly"))
    page.locator("#id_kubeconfig").blur()  # "change": the contexts are looked up
    offer = page.locator("#context-offer")
    offer.filter(has_text="edge-admin, edge-readonly").wait_for()
    options = page.locator("#context-options option")
    assert [options.nth(i).get_attribute("value") for i in range(options.count())] == [
        "edge-admin",
        "edge-readonly",
    ]
    page.fill("#id_context", "edge-readonly")
    page.click("#save-cluster")
    page.wait_for_url(re.compile(r"/clusters/edge/$"))
    # Pending until the sync (the worker, after the merge) has tried its server, which
    # does not exist: then Unreachable.
    assert page.locator("#cluster-state").get_attribute("data-state") in ("Pending", "Unreachable")
    assert TOKEN not in page.content()
    assert Cluster.objects.get(name="edge").context == "edge-readonly"
    # The list shows it; its kubeconfig is nowhere on the page.
    page.goto("/clusters/")
    assert page.locator('tr[data-cluster="edge"]').count() == 1
    assert TOKEN not in page.content()


def test_next_retry_countdown_ticks_and_ids_are_stable(
    new_page: NewPage, role_users: dict[str, User], mirror_data: Cluster
) -> None:
    page = new_page()
    login(page, "viewer")
    page.goto(CERT_URL)
    assert page.locator("#mirrored-ready").get_attribute("data-ready") == "False"
    assert page.locator("#mirrored-reason").get_attribute("data-reason") == "DoesNotExist"
    countdown = page.locator("#mirrored-next-retry time[data-countdown]")
    first = countdown.inner_text()
    assert re.fullmatch(r"in 1m \d+s", first), first
    # live.js ticks it every second.
    page.wait_for_function(
        "(before) => document.querySelector('#mirrored-next-retry time').textContent !== before",
        arg=first,
    )
    assert countdown.get_attribute("data-countdown-state") == "future"
    timeline = page.locator("#mirrored-timeline li.event")
    assert timeline.count() == 3
    assert page.locator("#force-renew").count() == 0  # a viewer


def test_scoped_viewer_sees_only_team_a(
    new_page: NewPage, role_users: dict[str, User], mirror_data: Cluster
) -> None:
    scoped_user("team-a-viewer", "viewer", (mirror_data, "team-a"))
    page = new_page()
    login_with(page, "team-a-viewer", "pw-team-a-viewer")
    assert page.locator("body").get_attribute("data-live-groups") == "k8s:prod/team-a"
    nav = page.locator("nav.mainnav").inner_text()
    assert "Clusters" in nav and "Issuers" not in nav and "Audit log" not in nav
    page.goto("/certificates/")
    rows = page.locator("tr[data-mirrored-certificate]")
    names = {rows.nth(i).get_attribute("data-mirrored-certificate") for i in range(rows.count())}
    assert names == {
        "prod/team-a/web",
        "prod/team-a/shop-with-a-rather-long-name-for-the-phone-layout",
    }
    assert page.locator("tr[data-certificate]").count() == 0
    response = page.goto("/clusters/prod/team-b/certificates/other-team/")
    assert response is not None and response.status == 404
    page.goto("/clusters/")
    assert page.locator('tr[data-cluster="staging"]').count() == 0


def test_operator_force_renews_and_approver_approves_in_the_browser(
    new_page: NewPage, role_users: dict[str, User], mirror_data: Cluster
) -> None:
    page = new_page()
    login(page, "admin")  # operator and approver
    page.goto(CERT_URL)
    page.click("#force-renew")  # the confirmation dialog is accepted by the fixture
    page.wait_for_url(re.compile(re.escape(CERT_URL) + "$"))
    page.locator("#mirrored-actions li").first.wait_for()
    renew = ClusterAction.objects.get(action="renew")
    assert (renew.namespace, renew.name, renew.actor) == ("team-a", "web", "admin")
    page.goto("/requests/")
    card = page.locator('[data-mirrored-request="prod/team-a/web-1"]')
    card.locator("input[name=reason]").first.fill("LooksRight")
    card.locator("button.approve").click()
    page.wait_for_url(re.compile(r"/requests/$"))
    approve = ClusterAction.objects.get(action="approve")
    assert (approve.name, approve.reason, approve.actor) == ("web-1", "LooksRight", "admin")
