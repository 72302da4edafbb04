"""Mirroring details that need no API server: CSR objects as plain dicts."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest

from issuance.kubernetes.csr_connector.csr_mirror import decision_of, observe, request_name
from issuance.models import Approval, KubeCSR
from tests.factories import make_ca_issuer
from tests.helpers import drain
from tests.kube.conftest import node_csr_pem

pytestmark = pytest.mark.django_db


def csr_obj(name: str = "node-1-x", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "resourceVersion": "42"},
        "spec": {
            "request": base64.b64encode(node_csr_pem("system:node:node-1").encode()).decode(),
            "signerName": "example.com/serving",
            "usages": ["client auth"],
            "username": "system:node:node-1",
            "groups": ["system:nodes"],
            **spec,
        },
    }


@pytest.fixture(autouse=True)
def signers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBE_SIGNER_NAMES", "example.com/serving=kube-ca")
    make_ca_issuer("kube-ca", "kube-ca-secret")


def test_expiration_seconds_from_1_22_servers_is_kept() -> None:
    row = observe(csr_obj(expirationSeconds=3600))
    assert row is not None
    assert row.request.spec["expirationSeconds"] == 3600
    assert row.request.spec["duration"] == "1h0m0s"


def test_absent_expiration_seconds_means_issuer_default() -> None:
    row = observe(csr_obj())
    assert row is not None
    assert "expirationSeconds" not in row.request.spec and "duration" not in row.request.spec


def test_observe_is_idempotent_and_tracks_resource_version() -> None:
    obj = csr_obj()
    first = observe(obj)
    obj["metadata"]["resourceVersion"] = "43"
    second = observe(obj)
    assert first is not None and second is not None and first.pk == second.pk
    assert KubeCSR.objects.get().resource_version == "43"


def test_unmapped_signer_and_unknown_issuer_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    assert observe(csr_obj(signerName="kubernetes.io/kube-apiserver-client-kubelet")) is None
    monkeypatch.setenv("KUBE_SIGNER_NAMES", "example.com/serving=does-not-exist")
    assert observe(csr_obj()) is None
    assert KubeCSR.objects.count() == 0


def test_undecodable_request_is_mirrored_and_denied_by_policy() -> None:
    row = observe(csr_obj(request="%%%not base64"))
    assert row is not None and row.request.spec["request"] == ""
    row.request.refresh_from_db()
    drain()
    row.request.refresh_from_db()
    assert row.request.approval == Approval.DENIED
    denied = row.request.get_condition("Denied")
    assert denied is not None and denied["reason"] == "PolicyDenied"


def test_names_and_decisions() -> None:
    assert request_name("node-1", "0a1b2c3d-0000") == "k8s-node-1-0a1b2c3d"
    assert len(request_name("n" * 253, "abc")) <= 253
    approved = {"status": {"conditions": [{"type": "Approved", "status": "True", "reason": "r"}]}}
    assert decision_of(approved)[0] == "Approved"
    assert decision_of({"status": {}}) == ("", {})
    failed = {"status": {"conditions": [{"type": "Failed", "status": "True"}]}}
    assert decision_of(failed)[0] == ""
