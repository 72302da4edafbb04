"""`disableAccountKeyGeneration` (cert-manager v1.21): the ACME account key is never made;
it is read from `privateKeySecretRef`, and while that Secret is missing the Issuer is
Ready=False naming it. Against real Pebble."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography.hazmat.primitives.asymmetric import ec
from django.contrib.auth.models import User
from django.core.management import call_command
from josepy.jwk import JWKEC

from issuance.acme import ratelimit
from issuance.acme.protocol.client import AcmeClient, TLSOptions
from issuance.controllers import issuers as issuer_controller
from issuance.models import Event, Issuer, Secret
from issuance.pki.encryption import decrypt_text
from issuance.pki.keys import private_key_to_pem
from tests.e2e.servers import PebbleServer, pebble_stack
from tests.helpers import drain

pytestmark = [pytest.mark.e2e, pytest.mark.django_db, pytest.mark.timeout(180)]


@pytest.fixture
def pebble(tmp_path: Path) -> Iterator[PebbleServer]:
    ratelimit.forget_cache()
    with pebble_stack(tmp_path) as (server, _dns):
        yield server
    ratelimit.forget_cache()


def test_the_account_key_comes_from_the_secret_and_is_never_generated(
    pebble: PebbleServer, tmp_path: Path
) -> None:
    manifest = {
        "apiVersion": "cert-manager.io/v1",
        "kind": "ClusterIssuer",
        "metadata": {"name": "le"},
        "spec": {
            "acme": {
                "server": pebble.directory_url,
                "caBundle": pebble.ca_bundle_b64,
                "disableAccountKeyGeneration": True,
                "privateKeySecretRef": {"name": "le-account-key"},
                "solvers": [{"http01": {}}],
            }
        },
    }
    path = tmp_path / "le.yaml"
    path.write_text(yaml.safe_dump(manifest))
    call_command("apply", "-f", str(path), stdout=io.StringIO())
    drain()
    issuer = Issuer.objects.get(name="le")
    ready = issuer.get_condition("Ready")
    assert ready and ready["status"] == "False", ready
    assert ready["reason"] == "ErrGetAccountKey"
    assert "spec.acme.privateKeySecretRef" in ready["message"]
    assert "'le-account-key' not found" in ready["message"]
    assert issuer.acme_account_key_ciphertext == ""
    assert not Event.objects.filter(reason="AccountKeyGenerated").exists()

    # The key appears (as cert-manager reads it: tls.key); the Issuer registers with it.
    key = ec.generate_private_key(ec.SECP256R1())
    pem = private_key_to_pem(key, "PKCS8")
    secret = Secret(name="le-account-key")
    secret.tls_key = pem
    secret.save()
    issuer_controller.reconcile(issuer)
    issuer.refresh_from_db()
    assert issuer.condition_is("Ready"), issuer.conditions
    assert decrypt_text(issuer.acme_account_key_ciphertext).strip() == pem.strip()
    same_key = AcmeClient(
        pebble.directory_url, JWKEC(key=key), "", TLSOptions(ca_bundle_b64=pebble.ca_bundle_b64)
    )
    found = same_key.new_account(only_return_existing=True)
    assert found["url"] == issuer.acme_account_uri
    assert not Event.objects.filter(reason="AccountKeyGenerated").exists()


def test_the_api_needs_the_key_reference(
    role_users: dict[str, User], api_client_for: Callable[[User | None], Any]
) -> None:
    api = api_client_for(role_users["admin"])
    body = {
        "name": "le",
        "spec": {"acme": {"server": "https://ca.invalid/dir", "disableAccountKeyGeneration": True}},
    }
    response = api.post("/api/v1/issuers/", body, format="json")
    assert response.status_code == 400, response.content
    assert "is required with disableAccountKeyGeneration" in str(
        response.json()["spec.acme.privateKeySecretRef"]
    )
    assert not Issuer.objects.exists()
