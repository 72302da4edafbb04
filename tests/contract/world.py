"""The rows the API contract run starts from: one of everything the API shows, in real states.

Plain code (no pytest): the contract test calls `build()` on its test database, and by hand
`manage.py shell -c "from tests.contract.world import build; print(build())"` prints the two
credentials to run schemathesis with (docs/development.md, "The API contract").
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone

from issuance.access.apitokens import create_token as create_api_token
from issuance.bootstrap.certificaterequests import submit
from issuance.bootstrap.tokens import create_token
from issuance.kubernetes.certmanager.kinds import MIRRORED
from issuance.models import (
    AcmeServer,
    CertificateRequest,
    Cluster,
    ClusterAction,
    ClusterEvent,
    ClusterResource,
    Event,
)
from issuance.notifications import channel_store, rules, webhooks
from issuance.operations import actions
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key
from issuance.worker.loop import Worker
from tests.factories import (
    make_acme_issuer,
    make_ca_issuer,
    make_certificate,
    make_challenge,
    make_order,
    make_selfsigned_issuer,
)

ACME_SERVER = "https://ca.invalid/dir"


@dataclass(frozen=True)
class Credentials:
    admin_token: str  # `Authorization: Token <admin_token>`, a superuser's API token
    bootstrap_token: str  # `Authorization: Bearer <bootstrap_token>`

    def __str__(self) -> str:
        return f"ADMIN_TOKEN={self.admin_token}\nBOOTSTRAP_TOKEN={self.bootstrap_token}"


def csr_pem(*dns_names: str, common_name: str = "") -> str:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    return build_csr(key, {"commonName": common_name, "dnsNames": list(dns_names)})


def build() -> Credentials:
    """Issuers of every kind, issued and pending certificates, decided and pending requests,
    an ACME order with challenges, a CA that does not answer, events, and both tokens."""
    admin = User.objects.create_superuser("admin", "admin@example.test", secrets.token_hex(8))
    _, token = create_api_token(admin, "contract", actor="admin")
    selfsigned = make_selfsigned_issuer("ss")
    make_ca_issuer("node-ca", "node-ca-key-pair")
    acme = make_acme_issuer("acme", server=ACME_SERVER)
    make_certificate("shop", selfsigned, privateKey={"algorithm": "ECDSA", "size": 256})
    Worker(threads=1).run_once()  # "shop" is issued: dates, revision, a stored key pair
    make_certificate("waiting", acme)
    AcmeServer.objects.create(
        directory_url=ACME_SERVER,
        unreachable_since=timezone.now() - timedelta(minutes=5),
        unreachable_error="connection refused",
        failed_requests=3,
        probe_at=timezone.now() + timedelta(minutes=1),
    )
    order = make_order(acme, "shop-order")
    make_challenge(order, "www.example.test", processing=True, state="pending", presented=True)
    make_challenge(order, "api.example.test", "dns-01")
    for name, decide in (("ext-pending", None), ("ext-denied", actions.deny)):
        request = CertificateRequest.objects.create(
            name=name,
            issuer=selfsigned,
            spec={"request": csr_pem(f"{name}.example.test"), "issuerRef": {"name": "ss"}},
            requester="someone",
            source="api",
        )
        if decide is not None:
            decide(request, actor="admin", reason="Checked", message="by the contract world")
    bootstrap_row, bootstrap = create_token(actor="admin", description="contract")
    submit(
        bootstrap_row,
        {
            "name": "node-1-serving",
            "request": csr_pem("node-1.example.test", common_name="system:node:node-1"),
            "issuerRef": {"name": "node-ca"},
            "expirationSeconds": 3600,
        },
    )
    Event.objects.create(kind="Certificate", name="shop", reason="Checked", actor="admin")
    # issuance-webhooks: a webhook with a queued notice (no worker runs: it stays Pending)
    hook = webhooks.create_webhook(
        "deploy", "https://deploy.invalid/hook", "contract-webhook-secret", actor="admin"
    )
    webhooks.queue_test(hook, actor="admin")
    # notification-channels and notification-rules: one of each, so reads, changes and a
    # rule's `channel` reach real rows (no worker runs: nothing is sent).
    channel_store.save(
        None, "ops-mail", channel_store.ChannelInput(url="json://127.0.0.1:1/"), "admin"
    )
    rules.create(
        "web-expiring",
        {"channel": "ops-mail", "condition": "expiring", "threshold": 10, "name_pattern": "web-*"},
        "admin",
    )
    _cluster_mode()
    return Credentials(admin_token=token, bootstrap_token=bootstrap)


CLUSTER_KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: contract}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def _cluster_mode() -> None:
    """A cluster (unreachable: no worker runs) with one mirrored object of each kind, a
    pending and a decided request, a Kubernetes Event and a queued action."""
    cluster = Cluster(name="prod", created_by="admin")
    cluster.kubeconfig = CLUSTER_KUBECONFIG
    cluster.save()
    for kind in MIRRORED:
        names = ["web", "web-decided"] if kind.kind == "CertificateRequest" else ["web"]
        for name in names:
            ClusterResource.objects.create(
                cluster=cluster,
                kind=kind.kind,
                namespace="team-a" if kind.namespaced else "",
                name=name,
                uid=f"uid-{kind.plural}-{name}",
                body={"metadata": {"name": name}, "spec": {}, "status": {}},
                state="Approved" if name == "web-decided" else "",
                certificate_name="web",
            )
    ClusterEvent.objects.create(
        cluster=cluster,
        uid="event-1",
        namespace="team-a",
        involved_kind="Certificate",
        involved_name="web",
        reason="Issuing",
        message="Issuing certificate as Secret does not exist",
    )
    ClusterAction.objects.create(
        cluster=cluster,
        action="renew",
        kind="Certificate",
        namespace="team-a",
        name="web",
        uid="uid-certificates-web",
        actor="admin",
        reason="ManuallyTriggered",
    )
