"""A mirrored Certificate's page follows the cluster live: the test writes the Certificate's
status in a real kube-apiserver, the console's worker mirrors it, and the open page shows
the failure and cert-manager's next retry without a reload."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User

from issuance.models import Cluster, ClusterResource, RoleScope
from tests.browser.pages import login
from tests.clusters import cm
from tests.clusters.conftest import (  # noqa: F401  (fixtures, used by name)
    CmCluster,
    cm_a,
    cm_clusters,
    namespace,
)
from tests.helpers import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.kube, pytest.mark.timeout(240)]

NewPage = Callable[[], Any]
Shot = Callable[[Any, str], Any]
FAILURE = "the ACME server refused the order (browser test)"


def _countdown_at(page: Any, when_ms: int) -> bool:
    """Whether the page shows a live countdown to `when_ms` (whatever the ISO format)."""
    found: bool = page.evaluate(
        "ms => [...document.querySelectorAll('time[data-countdown]')]"
        ".some(t => Date.parse(t.getAttribute('data-countdown')) === ms)",
        when_ms,
    )
    return found


def test_mirrored_certificate_changes_live(
    request: pytest.FixtureRequest,
    server: str,
    new_page: NewPage,
    screenshot: Shot,
    make_user: Callable[..., User],
) -> None:
    prod: CmCluster = request.getfixturevalue("cm_a")
    ns: str = request.getfixturevalue("namespace")
    objects = prod.objects()
    issued_at = cm.now() - timedelta(days=10)
    objects.create(cm.certificate("web", ns), status=cm.ready_status(issued_at))

    cluster = Cluster(name="prod")
    cluster.kubeconfig = prod.console_kubeconfig
    cluster.save()
    # A viewer of prod/<ns> only: holds no console-wide role, still gets the live updates.
    viewer = make_user("team-viewer", "viewer")
    RoleScope.objects.create(user=viewer, cluster=cluster, namespace=ns)

    def mirrored() -> ClusterResource | None:
        return ClusterResource.objects.filter(
            cluster=cluster, kind="Certificate", namespace=ns, name="web", ready="True"
        ).first()

    wait_for(mirrored, 60, "the Certificate mirrored by the worker")

    page = new_page()
    login(page, "team-viewer")
    page.goto(f"/clusters/prod/{ns}/certificates/web/")
    page.locator("#live-status[data-state=live]").wait_for()
    assert "Certificate is up to date" in page.inner_text("body")
    screenshot(page, "ready")

    # No reload from here on.
    page.evaluate("window.__sameDocument = true")
    failed_at = cm.now()
    current = objects.get("Certificate", ns, "web")
    objects.set_status(current, cm.failed_status(2, failed_at, FAILURE))
    page.get_by_text(FAILURE).first.wait_for(timeout=30_000)
    # cert-manager's backoff for the 2nd failure: 1 h × 2^(2−1) = 2 h after lastFailureTime.
    retry_ms = int((failed_at + timedelta(hours=2)).timestamp() * 1000)
    page.wait_for_function(
        "ms => [...document.querySelectorAll('time[data-countdown]')]"
        ".some(t => Date.parse(t.getAttribute('data-countdown')) === ms)",
        arg=retry_ms,
        timeout=15_000,
    )
    assert _countdown_at(page, retry_ms)
    assert page.evaluate("window.__sameDocument") is True
    screenshot(page, "failed-live")
