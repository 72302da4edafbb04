"""Mirror derivations and storage without an API server: cert-manager objects as plain dicts."""

from __future__ import annotations

import inspect
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from issuance.controllers import registry
from issuance.kubernetes.certmanager import mirror
from issuance.kubernetes.certmanager.cluster_api import is_cert_manager_event
from issuance.kubernetes.certmanager.sync import ClusterSync, Syncer
from issuance.kubernetes.watcher import Batch
from issuance.models import Cluster, ClusterEvent, ClusterResource
from issuance.worker import claim
from issuance.worker.loop import Worker
from tests.clusters import cm
from tests.factories import make_cluster as add_cluster

pytestmark = pytest.mark.django_db

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


@pytest.fixture
def prod() -> Cluster:
    return add_cluster("prod", KUBECONFIG)


def served(obj: dict[str, Any], owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """`obj` as the API server returns it: uid, resourceVersion, managedFields."""
    meta = obj["metadata"]
    meta.setdefault("uid", str(uuid.uuid4()))
    meta.setdefault("resourceVersion", "1")
    meta["managedFields"] = [{"manager": "cert-manager", "operation": "Update"}]
    if owner is not None:
        cm.owned_by(obj, owner)
    return obj


def test_certificate_columns() -> None:
    failed_at = cm.now()
    obj = served(cm.certificate("web", "team-a"))
    obj["status"] = cm.failed_status(3, failed_at, "The certificate request has failed: boom")
    cluster = Cluster(min_backoff_seconds=3600, max_backoff_seconds=115200)
    cols = mirror.derived("Certificate", obj, cluster)
    assert (cols["ready"], cols["reason"]) == ("False", "DoesNotExist")
    assert cols["message"] == "The certificate request has failed: boom"  # Issuing says why
    assert (cols["issuer_name"], cols["issuer_kind"]) == ("letsencrypt", "ClusterIssuer")
    assert cols["failed_attempts"] == 3 and cols["last_failure_time"] == failed_at
    assert cols["next_retry_at"] == failed_at + timedelta(hours=4)
    assert cols["certificate_name"] == "web"
    obj["status"] = cm.ready_status(failed_at, days=90, renew_before_days=30)
    cols = mirror.derived("Certificate", obj, cluster)
    assert cols["ready"] == "True" and cols["next_retry_at"] is None
    assert cols["message"] == "Certificate is up to date and has not expired"
    assert cols["not_after"] == failed_at + timedelta(days=90)
    assert cols["renewal_time"] == failed_at + timedelta(days=60)


def test_certificate_request_columns() -> None:
    cluster = Cluster()
    cert = served(cm.certificate("web", "team-a"))
    obj = served(cm.certificate_request("web-1", "team-a", "web"), cert)
    assert mirror.derived("CertificateRequest", obj, cluster)["state"] == ""
    obj["status"] = {
        "conditions": [
            {"type": "Approved", "status": "True", "reason": "policy.cert-manager.io"},
            {"type": "Ready", "status": "False", "reason": "Pending", "message": "Waiting"},
        ]
    }
    cols = mirror.derived("CertificateRequest", obj, cluster)
    assert (cols["state"], cols["ready"], cols["reason"]) == ("Approved", "False", "Pending")
    assert (cols["owner_kind"], cols["owner_name"]) == ("Certificate", "web")
    assert (cols["issuer_name"], cols["issuer_kind"]) == ("ca", "Issuer")
    # No annotation (an older cert-manager): the Certificate owner names it.
    del obj["metadata"]["annotations"]["cert-manager.io/certificate-name"]
    assert mirror.derived("CertificateRequest", obj, cluster)["certificate_name"] == "web"
    obj["status"]["conditions"] = [{"type": "Denied", "status": "True", "reason": "Nope"}]
    assert mirror.derived("CertificateRequest", obj, cluster)["state"] == "Denied"


def test_issuer_columns() -> None:
    obj = served(
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "ClusterIssuer",
            "metadata": {"name": "letsencrypt"},
            "spec": {"acme": {"server": "https://acme.example/directory"}},
            "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "ErrInit"}]},
        }
    )
    cols = mirror.derived("ClusterIssuer", obj, Cluster())
    assert (cols["ready"], cols["reason"], cols["state"]) == ("False", "ErrInit", "acme")


def test_rows_written_only_when_the_resource_version_changes(prod: Cluster) -> None:
    obj = served(cm.certificate("web", "team-a"))
    first = mirror.observe(prod, "Certificate", obj)
    assert first is not None and "managedFields" not in first.body["metadata"]
    assert (first.cluster_id, first.namespace, first.name) == (prod.pk, "team-a", "web")
    assert mirror.observe(prod, "Certificate", obj) is None  # same resourceVersion
    obj["metadata"]["resourceVersion"] = "2"
    obj["status"] = cm.ready_status(cm.now())
    second = mirror.observe(prod, "Certificate", obj)
    assert second is not None and second.pk == first.pk and second.ready == "True"
    assert ClusterResource.objects.count() == 1


def test_chain_linked_whatever_order_it_arrives_in(prod: Cluster) -> None:
    cert = served(cm.certificate("web", "team-a"))
    request = served(cm.certificate_request("web-1", "team-a", "web"), cert)
    order = served(cm.order("web-1-1", "team-a", "web-1", "web.example.com"), request)
    challenge = served(cm.challenge("web-1-1-0", "team-a", "web.example.com"), order)
    challenge["status"] = {"state": "pending", "reason": "Waiting for HTTP-01 propagation"}
    mirror.observe(prod, "Challenge", challenge)
    mirror.observe(prod, "Order", order)
    row = ClusterResource.objects.get(kind="Challenge")
    assert (row.certificate_name, row.state, row.owner_name) == ("", "pending", "web-1-1")
    assert row.message == "Waiting for HTTP-01 propagation"
    mirror.observe(prod, "CertificateRequest", request)  # the owner arrives: all linked
    assert set(ClusterResource.objects.values_list("kind", "certificate_name")) == {
        ("CertificateRequest", "web"),
        ("Order", "web"),
        ("Challenge", "web"),
    }


def test_list_and_deleted_events_remove_rows_and_their_timeline(prod: Cluster) -> None:
    keep, drop = served(cm.certificate("keep", "ns")), served(cm.certificate("drop", "ns"))
    mirror.apply(prod, Batch("LIST", [keep, drop], "Certificate"))
    event = cm_event(drop)
    mirror.apply(prod, Batch("ADDED", [event], mirror.EVENTS))
    assert ClusterEvent.objects.filter(involved_uid=drop["metadata"]["uid"]).count() == 1
    mirror.apply(prod, Batch("LIST", [keep], "Certificate"))  # a re-list without it
    assert list(ClusterResource.objects.values_list("name", flat=True)) == ["keep"]
    assert not ClusterEvent.objects.exists()
    mirror.apply(prod, Batch("DELETED", [keep], "Certificate"))
    assert not ClusterResource.objects.exists()


def cm_event(about: dict[str, Any], **extra: Any) -> dict[str, Any]:
    meta = about["metadata"]
    return {
        "metadata": {
            "name": f"{meta['name']}.1",
            "namespace": meta.get("namespace", ""),
            "uid": str(uuid.uuid4()),
            "resourceVersion": "5",
            "creationTimestamp": cm.ts(cm.now()),
        },
        "involvedObject": {
            "apiVersion": about["apiVersion"],
            "kind": about["kind"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
        "reason": "Issuing",
        "message": "Issued",
        "type": "Normal",
        **extra,
    }


def test_event_columns_old_and_new_style(prod: Cluster) -> None:
    cert = served(cm.certificate("web", "ns"))
    seen = cm.now()
    old = cm_event(
        cert,
        count=4,
        firstTimestamp=cm.ts(seen - timedelta(hours=1)),
        lastTimestamp=cm.ts(seen),
        source={"component": "cert-manager-certificates-trigger", "host": "node-1"},
    )
    cols = mirror.event_columns(old)
    assert (cols["count"], cols["first_seen"], cols["last_seen"]) == (
        4,
        seen - timedelta(hours=1),
        seen,
    )
    assert cols["source"] == "cert-manager-certificates-trigger, node-1"
    new = cm_event(
        cert,
        eventTime=cm.ts(seen).replace("Z", ".000000Z"),
        series={"count": 7, "lastObservedTime": cm.ts(seen + timedelta(minutes=5))},
        reportingComponent="cert-manager",
    )
    cols = mirror.event_columns(new)
    assert (cols["count"], cols["last_seen"], cols["source"]) == (
        7,
        seen + timedelta(minutes=5),
        "cert-manager",
    )
    assert mirror.observe_event(prod, old) == 1 and mirror.observe_event(prod, old) == 0
    assert is_cert_manager_event(old)
    assert not is_cert_manager_event({"involvedObject": {"apiVersion": "v1", "kind": "Pod"}})
    assert is_cert_manager_event({"involvedObject": {"apiVersion": "acme.cert-manager.io/v1"}})


def test_the_worker_never_reconciles_mirrored_objects(prod: Cluster) -> None:
    models = {ctrl.model for ctrl in registry.controllers()}
    assert ClusterResource not in models and ClusterEvent not in models
    sources = [inspect.getsource(claim), inspect.getsource(Worker)]
    controllers = Path(registry.__file__).parent
    sources += [p.read_text() for p in controllers.glob("*.py") if p.name != "registry.py"]
    assert not any("ClusterResource" in s or "clusterresource" in s for s in sources)
    # A worker pass over everything due leaves a mirrored row exactly as the mirror wrote it.
    row = mirror.observe(prod, "Certificate", served(cm.certificate("web", "ns")))
    assert row is not None
    worker = Worker(threads=1)
    worker.steps = []  # the controllers only (the sync step is what writes rows)
    worker.run_once()
    again = ClusterResource.objects.get(pk=row.pk)
    assert (again.observed_at, again.body, again.resource_version) == (
        row.observed_at,
        row.body,
        row.resource_version,
    )


def test_overlong_fields_and_a_bad_batch_do_not_stop_the_sync(prod: Cluster) -> None:
    order = served(cm.order("web-1-1", "ns", "web-1", "web.example.com"))
    order["status"] = {"state": "x" * 40, "reason": "failed: " + "y" * 300}
    bad = Batch("ADDED", [served(cm.certificate("web", "ns"))], "NoSuchKind")
    good = Batch("ADDED", [order], "Order")
    sync = ClusterSync(prod, lambda: None)
    Syncer(owner="w")._apply(prod, sync, [bad, good])  # the bad one is logged and skipped
    row = ClusterResource.objects.get(cluster=prod, kind="Order")
    assert row.state == "x" * 32 and len(row.reason) == 128
    assert row.message == "failed: " + "y" * 300  # a text column keeps everything
