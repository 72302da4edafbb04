"""`spec.secretTemplate` on the exported Secret, against a real kube-apiserver
(tests/kube/cluster.py): applied with `manage.py apply -f`, changed through the API, the
Secret's labels and annotations follow without a new revision."""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import User
from django.core.management import call_command
from kubernetes import client as k8s

from issuance.kubernetes.csr_connector.connector import Connector
from issuance.kubernetes.csr_connector.csr_api import KubeApi
from issuance.models import Certificate
from tests.factories import make_ca_issuer
from tests.helpers import drain
from tests.kube.conftest import sync_until

pytestmark = [pytest.mark.kube, pytest.mark.django_db]


def _secret(kapi: KubeApi, name: str) -> dict[str, Any] | None:
    try:
        return kapi.read_secret("default", name)
    except k8s.exceptions.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def test_secret_template_is_carried_onto_the_exported_secret(
    kconn: Connector,
    kapi: KubeApi,
    tmp_path: Path,
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], Any],
) -> None:
    make_ca_issuer("kube-ca", "kube-ca-secret")
    target = f"web-tls-{uuid.uuid4().hex[:6]}"
    manifest: dict[str, Any] = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "web"},
        "spec": {
            "secretName": "web-tls",
            "dnsNames": ["web.example.test"],
            "issuerRef": {"name": "kube-ca"},
            # cert-manager's documented example (usage/certificate).
            "secretTemplate": {
                "annotations": {"my-secret-annotation-1": "foo", "my-secret-annotation-2": "bar"},
                "labels": {"my-secret-label": "foo"},
            },
            "secretExport": {"namespace": "default", "name": target},
        },
    }
    path = tmp_path / "web.yaml"
    path.write_text(yaml.safe_dump(manifest))
    call_command("apply", "-f", str(path), stdout=io.StringIO())
    drain()
    first = sync_until(lambda: _secret(kapi, target), kconn, what="Secret exported")
    metadata = first["metadata"]
    assert metadata["labels"] == {
        "my-secret-label": "foo",
        "app.kubernetes.io/managed-by": "issuance-console",
    }
    assert metadata["annotations"]["my-secret-annotation-1"] == "foo"
    assert metadata["annotations"]["my-secret-annotation-2"] == "bar"
    assert metadata["annotations"]["cert-manager.io/certificate-name"] == "web"

    # Through the API: a label removed, an annotation changed. The Secret follows; the
    # certificate is not issued again.
    spec = dict(manifest["spec"])
    spec["secretTemplate"] = {"annotations": {"my-secret-annotation-1": "changed"}}
    api = api_client_for(role_users["operator"])
    response = api.put("/api/v1/certificates/web/", {"spec": spec}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["spec"]["secretTemplate"] == spec["secretTemplate"]
    drain()

    def updated() -> dict[str, Any] | None:
        secret = _secret(kapi, target)
        assert secret is not None, "the exported Secret is gone"
        changed = secret["metadata"]["annotations"].get("my-secret-annotation-1") == "changed"
        return secret if changed else None

    second = sync_until(updated, kconn, what="Secret metadata updated")
    assert "my-secret-label" not in second["metadata"].get("labels", {})
    assert "my-secret-annotation-2" not in second["metadata"]["annotations"]
    assert second["data"]["tls.crt"] == first["data"]["tls.crt"]
    assert Certificate.objects.get(name="web").revision == 1
