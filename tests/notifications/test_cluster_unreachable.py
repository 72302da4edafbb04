""" "Cluster unreachable" against a real kube-apiserver killed and restarted.

The module starts its own etcd + kube-apiserver with cert-manager's CRDs (the session ones
of tests/kube and tests/clusters stay up for the modules that share them). Their state is
written by other processes: the CSR connector runs as `manage.py kube_connector`, the
cert-manager cluster sync as the worker's step in a process of its own (as `manage.py
reconcile` runs it, without the other steps); this process runs only the worker's
notifications step, with its default timings, and delivers to real HTTP receivers.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection

from issuance.kubernetes.csr_connector import config
from issuance.kubernetes.csr_connector.connector import Connector
from issuance.models import (
    Cluster,
    ClusterState,
    KubeConnectorState,
    Notification,
    NotificationCondition,
    NotificationRule,
)
from issuance.notifications import channel_store, deliver, detect
from issuance.notifications import step as notifications_step
from tests.clusters.conftest import CmCluster, _start
from tests.e2e.servers import Process, manage_py, start_process
from tests.factories import NOWHERE_KUBECONFIG, make_cluster
from tests.helpers import wait_for
from tests.kube.cluster import apiserver_binary, etcd_binary
from tests.notifications.receivers import HttpReceiver, http_receiver

SECRET = "a-webhook-secret-of-32-characters"
# The cluster sync step alone, looped as the worker loop runs its steps: at once when woken
# (a watcher failed or queued events, the sync's ticker), else every second.
SYNC_LOOP = """
from django.db import close_old_connections
from issuance.kubernetes.certmanager import sync
from issuance.worker.wakeup import local_wakeup
print("cluster sync running", flush=True)
while True:
    local_wakeup.clear()
    sync.step()
    close_old_connections()
    local_wakeup.wait(1.0)
"""


@pytest.fixture(scope="module")
def cluster_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CmCluster]:
    """This module's own kube-apiserver (it is killed and restarted here)."""
    if apiserver_binary() is None or etcd_binary() is None:
        pytest.skip("kube-apiserver/etcd missing: run `make kube-apiserver`")
    server = _start(Path(tmp_path_factory.mktemp("unreachable")))
    try:
        yield server
    finally:
        server.server.stop()


def _process_env() -> dict[str, str]:
    db = settings.DATABASES["default"]
    return {
        "DATABASE_URL": f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "SECRET_KEY": "cluster-unreachable",
        "KEY_ENCRYPTION_KEY": settings.KEY_ENCRYPTION_KEY,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "LOG_LEVEL": "INFO",
        "KUBE_CONNECTOR": "",
    }


class NotificationsWorker:
    """The worker's notifications step, looped as the worker loop runs it (every second, at
    once when woken), on its own thread and database connection; counts detection passes."""

    def __init__(self) -> None:
        self.passes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="notifications", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                before = notifications_step._state["detected"]
                notifications_step.step()
                if notifications_step._state["detected"] != before:
                    self.passes += 1
                notifications_step.wake.wait(1.0)
                notifications_step.wake.clear()
        finally:
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        notifications_step.wake.set()
        self._thread.join(30)
        assert not self._thread.is_alive()
        sender = notifications_step._sender
        if sender:
            sender[0].join(30)


def _posts(receiver: HttpReceiver) -> list[dict[str, Any]]:
    return [json.loads(p.body) for p in receiver.posts]


def _outages(receiver: HttpReceiver) -> list[dict[str, Any]]:
    return [p for p in _posts(receiver) if p["title"].startswith("Cluster unreachable")]


def _resolved(receiver: HttpReceiver) -> list[dict[str, Any]]:
    return [p for p in _posts(receiver) if p["title"].startswith("Cluster reachable again")]


def _stop_all(processes: list[Process]) -> None:
    for process in processes:
        process.stop()


@pytest.mark.django_db
def test_the_connector_stores_a_refused_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against a closed port: the first pass that sees the watcher fail stores the outage;
    later failures update the count, not the start."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(NOWHERE_KUBECONFIG)
    monkeypatch.setenv("KUBE_CONNECTOR", "1")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    config.reset()
    conn = Connector(wake=None)
    try:

        def stored(failures: int) -> KubeConnectorState | None:
            conn.sync()
            row = KubeConnectorState.objects.filter(failures__gte=failures).first()
            return row

        first = wait_for(lambda: stored(1), 60, "the outage stored")
        assert not first.connected and first.unreachable_since is not None
        assert "Connection refused" in first.last_error or "ConnectionRefused" in first.last_error
        later = wait_for(lambda: stored(first.failures + 1), 60, "another failure stored")
        assert later.unreachable_since == first.unreachable_since
        assert KubeConnectorState.objects.count() == 1
    finally:
        conn.stop()
        config.reset()


@pytest.mark.kube
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_one_message_per_outage_then_resolved_when_asked(
    cluster_server: CmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whatever the previous module left in this process: a fresh step, nothing detected yet.
    monkeypatch.setattr(notifications_step, "_state", {"detected": 0.0, "delivered": 0.0})
    monkeypatch.setattr(notifications_step, "_seen", {})
    prod = make_cluster("prod", cluster_server.console_kubeconfig)
    env = _process_env()
    with http_receiver() as pager, http_receiver() as mail:
        for name, receiver, resolved in (("pager", pager, True), ("mail", mail, False)):
            channel = channel_store.save(
                None,
                name,
                channel_store.ChannelInput(url="webhook+" + receiver.url, secret=SECRET),
                "test",
            )
            NotificationRule.objects.create(
                name=f"{name}-unreachable",
                channel=channel,
                condition=NotificationCondition.CLUSTER_UNREACHABLE,
                notify_resolved=resolved,
            )
        started = time.monotonic()
        processes = [
            manage_py(
                tmp_path,
                ["kube_connector"],
                {
                    **env,
                    "KUBE_CONNECTOR": "1",
                    "KUBECONFIG": str(cluster_server.server.kubeconfig),
                    "KUBE_SIGNER_NAMES": "example.com/unreachable-test=none",
                },
                name="kube-connector",
            ),
            start_process(
                "cluster-sync",
                [sys.executable, "manage.py", "shell", "-c", SYNC_LOOP],
                tmp_path,
                env,
            ),
        ]
        worker: NotificationsWorker | None = None
        try:
            wait_for(
                lambda: KubeConnectorState.objects.filter(connected=True).exists(),
                60,
                "the connector process stores Connected",
            )
            wait_for(
                lambda: Cluster.objects.get(pk=prod.pk).state == ClusterState.CONNECTED,
                60,
                "the sync process stores Connected",
            )
            print(
                f"\nboth connected {time.monotonic() - started:.0f} s after the processes started"
            )
            worker = NotificationsWorker()

            cluster_server.server.kill_apiserver()
            killed = time.monotonic()
            down = wait_for(
                lambda: Cluster.objects.get(pk=prod.pk).unreachable_since, 30, "cluster outage"
            )
            wait_for(
                lambda: KubeConnectorState.objects.get().unreachable_since,
                60,
                "connector outage",
            )
            wait_for(
                lambda: len(_outages(pager)) >= 2 and len(_outages(mail)) >= 2,
                detect.UNREACHABLE_AFTER.total_seconds() + 90,
                "one message per subject on each channel",
            )
            reported = time.monotonic() - killed
            print(f"kill -> messages: {reported:.0f} s")
            # Not before the outage lasted a minute, and within a minute or two.
            assert detect.UNREACHABLE_AFTER.total_seconds() <= reported < 150
            for receiver in (pager, mail):
                by_subject = {p["subject"]: p for p in _outages(receiver)}
                assert sorted(by_subject) == ["Cluster/prod", "KubeConnector/default"]
                assert by_subject["Cluster/prod"]["title"] == "Cluster unreachable: prod"
                assert (
                    "cannot reach the API server of cluster prod since"
                    in by_subject["Cluster/prod"]["body"]
                )
                assert "CSR connector" in by_subject["KubeConnector/default"]["body"]
                assert all(p["condition"] == "cluster_unreachable" for p in _posts(receiver))

            # The outage goes on: more passes (the step's own, and some right away) send
            # nothing more; the outage started once.
            seen = worker.passes
            for _ in range(3):
                deliver.detect_pass()
            wait_for(lambda: worker.passes > seen, 60, "another detection pass of the step")
            deliver.deliver_due()
            assert (len(pager.posts), len(mail.posts)) == (2, 2)
            assert Cluster.objects.get(pk=prod.pk).unreachable_since == down

            cluster_server.server.start_apiserver()
            back = time.monotonic()
            wait_for(lambda: len(_resolved(pager)) >= 2, 150, "resolved messages on pager")
            print(f"restart -> resolved: {time.monotonic() - back:.0f} s")
            assert sorted(p["subject"] for p in _resolved(pager)) == [
                "Cluster/prod",
                "KubeConnector/default",
            ]
            assert "reaches the API server of cluster prod again" in next(
                p["body"] for p in _resolved(pager) if p["subject"] == "Cluster/prod"
            )
            stored = Cluster.objects.get(pk=prod.pk)
            assert stored.unreachable_since is None and stored.last_outage_since == down
            assert KubeConnectorState.objects.get().connected
            # Both rules are read in the same pass: mail asked for no resolved message.
            deliver.detect_pass()
            deliver.deliver_due()
            assert len(pager.posts) == 4
            assert len(mail.posts) == 2 and _resolved(mail) == []
            assert Notification.objects.filter(channel__name="mail").count() == 2
        finally:
            if worker is not None:
                worker.stop()
            _stop_all(processes)
            if not cluster_server.server.apiserver.alive():
                cluster_server.server.start_apiserver()
