"""Adding a cluster, or changing its credentials or backoff, wakes the workers' sync at once,
whichever way it was saved; the sync's own saves do not."""

from __future__ import annotations

import pytest

from issuance.worker.wakeup import steps_requested
from tests.factories import make_cluster

pytestmark = pytest.mark.django_db(transaction=True)  # on_commit runs: the wake-up is sent


def test_a_new_cluster_and_new_settings_ask_for_the_steps() -> None:
    steps_requested.clear()
    cluster = make_cluster("prod")
    assert steps_requested.is_set()

    steps_requested.clear()
    cluster.save(update_fields=["last_sync", "state"])  # what the sync itself writes
    assert not steps_requested.is_set()

    cluster.min_backoff_seconds = 600
    cluster.save(update_fields=["min_backoff_seconds"])
    assert steps_requested.is_set()
    steps_requested.clear()
