"""The API takes what `manage.py apply` takes: a manifest as `kubectl get -o yaml` prints it
applies, the fields Kubernetes added named in a `Warning: 299` header; a CA Issuer whose
Secret does not exist yet is stored (Ready=False until it appears)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from rest_framework.test import APIClient

from issuance.controllers import issuers as issuer_controller
from issuance.models import Certificate, Issuer

MANIFEST = Path(__file__).parents[1] / "cli" / "manifests" / "kubectl-get.yaml"


def manifests() -> tuple[dict[str, Any], dict[str, Any]]:
    issuer, certificate = (d for d in yaml.safe_load_all(MANIFEST.read_text()) if d)
    return issuer, certificate


@pytest.mark.django_db
def test_kubectl_get_output_posts_and_puts_with_warnings(admin: APIClient) -> None:
    issuer, certificate = manifests()
    created = admin.post("/api/v1/issuers/", issuer, format="json")
    assert created.status_code == 201, created.content
    header = created.headers["Warning"]
    assert header.startswith('299 - "metadata.uid ignored (set by Kubernetes)"')
    for field in (
        "metadata.resourceVersion",
        "metadata.creationTimestamp",
        "metadata.generation",
        "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration]",
        "status",
    ):
        assert f'"{field} ignored' in header, (field, header)
    assert Issuer.objects.get(name="copied-selfsigned").spec == {"selfSigned": {}}

    created = admin.post("/api/v1/certificates/", certificate, format="json")
    assert created.status_code == 201, created.content
    assert '299 - "metadata.ownerReferences ignored' in created.headers["Warning"]
    assert '"metadata.managedFields ignored' in created.headers["Warning"]
    cert = Certificate.objects.get(name="copied-web")
    assert cert.generation == 1 and cert.spec["dnsNames"] == ["copied.example.test"]

    # The same manifest again with PUT: unchanged (no new generation), still warned.
    replaced = admin.put("/api/v1/certificates/copied-web/", certificate, format="json")
    assert replaced.status_code == 200, replaced.content
    assert '"metadata.ownerReferences ignored' in replaced.headers["Warning"]
    cert.refresh_from_db()
    assert cert.generation == 1


@pytest.mark.django_db
def test_a_plain_body_has_no_warning(admin: APIClient) -> None:
    response = admin.post(
        "/api/v1/issuers/", {"name": "plain", "spec": {"selfSigned": {}}}, format="json"
    )
    assert response.status_code == 201, response.content
    assert "Warning" not in response.headers


@pytest.mark.django_db
def test_ca_issuer_with_a_secret_not_there_yet_is_stored_not_ready(admin: APIClient) -> None:
    response = admin.post(
        "/api/v1/issuers/",
        {"name": "later-ca", "spec": {"ca": {"secretName": "later-ca-key-pair"}}},
        format="json",
    )
    assert response.status_code == 201, response.content
    issuer = Issuer.objects.get(name="later-ca")
    issuer_controller.reconcile(issuer)
    issuer.refresh_from_db()
    ready = issuer.get_condition("Ready")
    assert ready and ready["status"] == "False" and ready["reason"] == "ErrGetKeyPair"
    assert "later-ca-key-pair" in ready["message"]


@pytest.mark.django_db
def test_other_metadata_is_refused_as_apply_refuses_it(admin: APIClient, tmp_path: Path) -> None:
    """Both take the same manifests: a metadata field neither reads nor knows Kubernetes to
    add (a typo, `generateName`) is refused naming it, and nothing is stored."""
    from django.core.management import CommandError, call_command

    issuer, _ = manifests()
    issuer["metadata"]["generateName"] = "copied-"
    response = admin.post("/api/v1/issuers/", issuer, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["metadata.generateName"] == ["unsupported field"]
    path = tmp_path / "issuer.yaml"
    path.write_text(yaml.safe_dump(issuer))
    with pytest.raises(CommandError, match=r"metadata\.generateName: unsupported field"):
        call_command("apply", "-f", str(path))
    assert not Issuer.objects.filter(name="copied-selfsigned").exists()
