"""next_retry_at as the mirror computes it: cert-manager's backoff, per-cluster settings."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest

from issuance.kubernetes.certmanager import mirror
from issuance.models import ClusterResource
from tests.clusters import cm
from tests.clusters.test_mirror_unit import KUBECONFIG, served
from tests.factories import make_cluster as add_cluster

pytestmark = pytest.mark.django_db

HOUR = timedelta(hours=1)


def failed(name: str, attempts: int | None, when: datetime) -> dict[str, Any]:
    obj = served(cm.certificate(name, "ns"))
    status = cm.failed_status(attempts or 1, when)
    if attempts is None:
        del status["failedIssuanceAttempts"]
    obj["status"] = status
    return obj


def test_default_backoff_doubles_from_one_hour_to_32() -> None:
    prod = add_cluster("prod", KUBECONFIG)
    failed_at = cm.now()
    expected = {1: 1, 2: 2, 3: 4, 4: 8, 5: 16, 6: 32, 7: 32, 12: 32}
    for attempts, hours in expected.items():
        mirror.observe(prod, "Certificate", failed(f"c{attempts}", attempts, failed_at))
        row = ClusterResource.objects.get(cluster=prod, name=f"c{attempts}")
        assert row.next_retry_at == failed_at + hours * HOUR, attempts
        assert row.failed_attempts == attempts
    # No failedIssuanceAttempts beside a lastFailureTime: cert-manager waits the minimum.
    mirror.observe(prod, "Certificate", failed("none", None, failed_at))
    assert ClusterResource.objects.get(name="none").next_retry_at == failed_at + HOUR


def test_custom_backoff_and_recompute_after_a_change() -> None:
    staging = add_cluster("staging", KUBECONFIG, min_backoff_seconds=600, max_backoff_seconds=3600)
    failed_at = cm.now()
    for attempts in (1, 2, 3, 4, 5):
        mirror.observe(staging, "Certificate", failed(f"c{attempts}", attempts, failed_at))
    minutes = {
        r.failed_attempts: (r.next_retry_at - failed_at).total_seconds() / 60
        for r in ClusterResource.objects.filter(cluster=staging)
        if r.next_retry_at is not None
    }
    assert minutes == {1: 10, 2: 20, 3: 40, 4: 60, 5: 60}
    # The operator puts cert-manager back on its defaults: every retry computed again.
    staging.min_backoff_seconds, staging.max_backoff_seconds = 3600, 115200
    staging.save()
    assert mirror.recompute_retries(staging) == 5
    row = ClusterResource.objects.get(cluster=staging, name="c5")
    assert row.next_retry_at == failed_at + 16 * HOUR
    assert mirror.recompute_retries(staging) == 0  # nothing left to change
