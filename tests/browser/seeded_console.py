"""A console with something in every state on every page (issue 21, item 2): the data the
accessibility sweep (tests/browser/test_accessibility.py) checks, made once, directly in the
database, from the shared builders (tests/factories.py, tests/web/builders.py,
tests/web/mirror_builders.py).

Every card and list shows each state it can show: pending CSRs on the dashboard (own
CertificateRequests and Kubernetes CSRs), certificates in backoff with next-retry countdowns,
expiring, expired, revoked and long-named ones, an ACME chain with challenges and orders in
each state, failed notification and webhook deliveries, bulk actions running and finished,
clusters in each connection state with their mirrored Certificates, CertificateRequests,
Orders, Challenges, Issuers, ClusterIssuers, Events and write-back actions, the audit log,
users (disabled, scoped) and tokens, download tokens, and the issuers' editors.

Nothing here moves on by itself: the rows are only read while the pages are checked, by a
server that runs no worker (`serve --no-worker`, see the sweep), so what a check sees is what
`seed_console` made. `PAGES` lists every page an admin reaches, with paths to
the seeded objects.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.utils import timezone

from issuance.access.apitokens import create_token
from issuance.delivery.downloadtokens import create_download_token
from issuance.models import (
    AcmeServer,
    BulkAction,
    BulkItem,
    Certificate,
    CertificateRequest,
    Cluster,
    ClusterAction,
    ClusterResource,
    Endpoint,
    Event,
    IssuanceWebhook,
    Issuer,
    KubeCSR,
    MirroredKind,
    Notification,
    NotificationChannel,
    NotificationRule,
    Order,
    Revocation,
    Secret,
    WebhookDelivery,
)
from issuance.pki.encryption import encrypt_text
from tests.factories import (
    csr_pem,
    make_acme_issuer,
    make_ca_issuer,
    make_ca_secret,
    make_certificate,
    make_challenge,
    make_selfsigned_issuer,
    role_group,
    scoped_user,
)
from tests.web.builders import acme_chain, backoff_certificate, pending_request, ready_certificate
from tests.web.mirror_builders import (
    child,
    event,
    failing_cert,
    make_cluster,
    mirrored,
    pending_cr,
    ready_cert,
)

# Names long enough to wrap (or not) in every table, card and heading: 64+ characters for
# certificates and issuers; clusters and namespaces at most 63 (Kubernetes labels, slugs).
LONG_CERTIFICATE = "payments-gateway-internal-api-eu-west-1-production-primary-ingress-tls"
LONG_ISSUER = "letsencrypt-production-dns01-route53-and-rfc2136-for-internal-zones"
LONG_CLUSTER = "production-eu-west-1-primary-kubernetes-cluster-cert-manager"
LONG_NAMESPACE = "team-payments-gateway-internal-services-and-ingress-routes"
ACME_SERVER = "https://acme.example.test/directory"
DOWN_SERVER = "https://acme-down.example.test/directory"
PAUSED_SERVER = "https://acme-paused.example.test/directory"
# Enough own certificates for the list to have a second page (its page size is 50).
FILLER_CERTIFICATES = 45

assert min(len(LONG_CERTIFICATE), len(LONG_ISSUER)) >= 64
assert max(len(LONG_CLUSTER), len(LONG_NAMESPACE)) <= 63

# Fixed ids, so the bulk pages' paths are known before the data is made.
RUNNING_BULK = uuid.UUID("0b7e3a52-51c1-4d7e-9a52-5b0c1a2e0001")
FINISHED_BULK = uuid.UUID("0b7e3a52-51c1-4d7e-9a52-5b0c1a2e0002")

# (screenshot name, path) of every page an admin reaches, with the seeded objects in them.
# test_accessibility.py checks that every console route is here or says why it is not.
PAGES: tuple[tuple[str, str], ...] = (
    ("dashboard", "/"),
    ("dashboard-cluster-filter", f"/?cluster={LONG_CLUSTER}&namespace={LONG_NAMESPACE}"),
    ("certificates", "/certificates/"),
    ("certificates-page-2", "/certificates/?page=2"),
    ("certificates-filtered-none", "/certificates/?q=no-such-name&backoff=1"),
    ("certificate-detail", "/certificates/web/"),
    ("certificate-detail-backoff", "/certificates/flaky/"),
    ("certificate-detail-acme-chain", "/certificates/shop-expiring/"),
    ("certificate-detail-long-name", f"/certificates/{LONG_CERTIFICATE}/"),
    ("certificate-detail-revoked", "/certificates/revoked-by-ops/"),
    ("certificate-detail-issuing", "/certificates/renewing-now/"),
    ("certificate-new", "/new-certificate/"),
    ("certificate-edit", "/certificates/web/edit/"),
    ("certificate-clone", "/certificates/web/clone/"),
    ("certificate-delete", "/certificates/web/delete/"),
    ("certificate-revoke", "/certificates/web/revoke/"),
    ("certificate-downloads", "/certificates/web/downloads/"),
    ("certificate-key-files", "/certificates/web/files/key/"),
    ("bulk-running", f"/bulk/{RUNNING_BULK}/"),
    ("bulk-finished", f"/bulk/{FINISHED_BULK}/"),
    ("requests", "/requests/"),
    ("issuers", "/issuers/"),
    ("issuer-new", "/new-issuer/"),
    ("issuer-edit", f"/issuers/{LONG_ISSUER}/edit/"),
    ("issuer-delete", "/issuers/letsencrypt-staging/delete/"),
    ("issuer-policy", "/issuers/manual-approval/policy/"),
    ("orders", "/orders/"),
    ("challenges", "/challenges/"),
    ("audit", "/audit/"),
    ("users", "/users/"),
    ("signin-locks", "/users/locks/"),
    ("oidc-rules", "/users/sso/"),
    ("tokens", "/account/tokens/"),
    ("account-security", "/account/security/"),
    ("password-change", "/account/password/"),
    ("webhooks", "/webhooks/"),
    ("notifications", "/notifications/"),
    ("notification-channel-edit", "/notifications/channels/ops-chat/edit/"),
    ("clusters", "/clusters/"),
    ("cluster-add", "/new-cluster/"),
    ("cluster-detail", f"/clusters/{LONG_CLUSTER}/"),
    ("cluster-detail-unauthorized", "/clusters/lab-unauthorized/"),
    ("cluster-edit", f"/clusters/{LONG_CLUSTER}/edit/"),
    ("cluster-delete", f"/clusters/{LONG_CLUSTER}/delete/"),
    (
        "mirrored-certificate-failing",
        f"/clusters/{LONG_CLUSTER}/{LONG_NAMESPACE}/certificates/api-gateway/",
    ),
    (
        "mirrored-certificate-ready",
        f"/clusters/{LONG_CLUSTER}/{LONG_NAMESPACE}/certificates/checkout/",
    ),
    (
        "mirrored-request-pending",
        f"/clusters/{LONG_CLUSTER}/{LONG_NAMESPACE}/certificaterequests/api-gateway-7/",
    ),
    (
        "mirrored-request-approved",
        f"/clusters/{LONG_CLUSTER}/{LONG_NAMESPACE}/certificaterequests/checkout-2/",
    ),
    ("mirrored-order", f"/clusters/{LONG_CLUSTER}/{LONG_NAMESPACE}/orders/api-gateway-7-1453/"),
    (
        "mirrored-challenge",
        f"/clusters/{LONG_CLUSTER}/{LONG_NAMESPACE}/challenges/api-gateway-7-1453-99/",
    ),
    ("mirrored-issuer", f"/clusters/{LONG_CLUSTER}/{LONG_NAMESPACE}/issuers/team-ca/"),
    ("mirrored-clusterissuer", f"/clusters/{LONG_CLUSTER}/clusterissuers/letsencrypt/"),
    ("api-docs", "/api/docs/"),
)


def _issuers() -> dict[str, Issuer]:
    selfsigned = make_selfsigned_issuer("selfsigned")
    manual = make_selfsigned_issuer("manual-approval", approvalPolicy={"autoApprove": "none"})
    acme = make_acme_issuer("letsencrypt-staging", server=ACME_SERVER)
    acme.set_condition("Ready", "True", "ACMEAccountRegistered", "The ACME account is registered")
    acme.save()
    long_acme = Issuer.objects.create(
        name=LONG_ISSUER,
        kind="acme",
        spec={
            "acme": {
                "server": DOWN_SERVER,
                "email": "pki-team@example.test",
                "solvers": [
                    {"http01": {}, "selector": {"dnsNames": ["www.example.test"]}},
                    {
                        "dns01": {
                            "rfc2136": {
                                "nameserver": "192.0.2.53:53",
                                "tsigKeyName": "acme-update",
                                "tsigAlgorithm": "HMACSHA256",
                                "tsigSecretSecretRef": {"name": "tsig", "key": "secret"},
                            }
                        },
                        "selector": {"dnsZones": ["internal.example.test"]},
                    },
                ],
            }
        },
    )
    long_acme.set_condition("Ready", "False", "CAUnreachable", "connect timeout after 10 s")
    long_acme.set_condition(
        "DNSPreflight", "False", "ZoneNotFound", "no SOA for internal.example.test"
    )
    long_acme.save()
    paused = make_acme_issuer("rate-limited-ca", server=PAUSED_SERVER)
    ca = make_ca_issuer("internal-ca")
    now = timezone.now()
    # A CA that does not answer (dashboard, issuers, certificate pages) and one that asked
    # for a pause (the scheduler card).
    AcmeServer.objects.create(
        directory_url=DOWN_SERVER,
        unreachable_since=now - timedelta(minutes=12),
        unreachable_error="connect timeout: acme-down.example.test:443 did not answer in 10 s",
        failed_requests=7,
        probes=4,
        probe_at=now + timedelta(seconds=20),
    )
    AcmeServer.objects.create(
        directory_url=PAUSED_SERVER,
        paused_until=now + timedelta(minutes=40),
        pause_reason="429 rateLimited: too many new orders recently",
    )
    return {
        "selfsigned": selfsigned,
        "manual": manual,
        "acme": acme,
        "long": long_acme,
        "paused": paused,
        "ca": ca,
    }


def _certificates(issuers: dict[str, Issuer]) -> dict[str, Certificate]:
    now = timezone.now()
    web = ready_certificate("web", issuers["selfsigned"])
    secret = make_ca_secret("web-tls", common_name="web.example.test")
    Secret.objects.filter(pk=secret.pk).update(certificate=web)
    backoff_certificate("flaky", issuers["selfsigned"], attempts=3)
    backoff_certificate("flaky-again", issuers["acme"], attempts=1)
    expiring = ready_certificate("shop-expiring", issuers["acme"], days_left=5)
    expiring.renewal_time = now - timedelta(hours=3)  # renewal overdue
    expiring.save()
    long = ready_certificate(LONG_CERTIFICATE, issuers["long"], days_left=20)
    long.spec = {
        **long.spec,
        "dnsNames": [
            f"{label}.payments-gateway.internal.example.test"
            for label in ("api", "checkout", "webhooks", "merchant-portal", "settlement-reports")
        ],
        "renewal": {
            "windows": [{"cron": "0 2 * * 1-5", "timezone": "Europe/Paris", "windowDuration": "4h"}]
        },
    }
    long.refresh_search_text()
    long.set_condition("Ready", "True", "Ready", "Certificate is up to date and has not expired")
    long.save()

    expired = ready_certificate("legacy-expired", issuers["selfsigned"], days_left=-3)
    expired.state = "Expired"
    expired.set_condition("Ready", "False", "Expired", "The certificate expired 3 days ago")
    expired.save()
    pending = make_certificate("new-pending", issuers["manual"])
    pending.state = "Pending"
    pending.save()
    issuing = make_certificate("renewing-now", issuers["acme"])
    issuing.state = "Issuing"
    issuing.revision = 2
    issuing.set_condition("Issuing", "True", "Renewing", "Renewing the certificate as scheduled")
    issuing.save()

    revoked = ready_certificate("revoked-by-ops", issuers["ca"])
    for serial, state, reason, message in (
        ("4f2a9c", "Revoked", "keyCompromise", ""),
        ("4f2a9d", "Pending", "superseded", "waiting for the CA"),
        ("4f2a9e", "Failed", "unspecified", "the CA said: alreadyRevoked"),
    ):
        Revocation.objects.create(
            issuer=issuers["ca"],
            certificate=revoked,
            certificate_name=revoked.name,
            serial=serial,
            reason=reason,
            state=state,
            message=message,
            requested_by="operator",
            revoked_at=now if state == "Revoked" else None,
        )

    for i in range(FILLER_CERTIFICATES):
        ready_certificate(f"service-{i:02d}", issuers["selfsigned"], days_left=30 + i)
    return {"web": web, "expiring": expiring, "long": long}


def _acme_chains(issuers: dict[str, Issuer], certs: dict[str, Certificate]) -> None:
    """The expiring certificate's chain: request → order → challenges in every step, and more
    orders (in every state) for the orders and challenges lists."""
    _, order, _ = acme_chain(certs["expiring"], issuers["acme"])
    now = timezone.now()
    steps: list[tuple[str, dict[str, Any]]] = [
        ("queued", {}),
        ("scheduled", {"processing": True, "scheduled_at": now, "reason": "presenting failed"}),
        ("presented", {"processing": True, "scheduled_at": now, "presented": True}),
        ("accepted", {"processing": True, "presented": True, "state": "processing"}),
        ("valid", {"finished": True, "presented": True, "state": "valid"}),
        (
            "invalid",
            {
                "finished": True,
                "state": "invalid",
                "reason": "urn:ietf:params:acme:error:unauthorized: 404 for the token",
            },
        ),
        ("errored", {"finished": True, "state": "errored", "reason": "the CA answered 500"}),
    ]
    for step, fields in steps:
        make_challenge(
            order,
            f"{step}.shop-expiring.example.test",
            "dns-01" if step in ("presented", "valid") else "http-01",
            name=f"shop-expiring-1-order-{step}",
            next_check_at=now + timedelta(seconds=40) if fields.get("processing") else None,
            **fields,
        )
    for state, reason in (
        ("", ""),
        ("ready", ""),
        ("valid", ""),
        ("invalid", "urn:ietf:params:acme:error:rejectedIdentifier: forbidden name"),
        ("errored", "finalize: the CA answered 500"),
    ):
        name = f"order-{state or 'new'}"
        cert = make_certificate(name, issuers["acme"])
        request = CertificateRequest.objects.create(
            name=f"{name}-1",
            issuer=issuers["acme"],
            certificate=cert,
            revision=1,
            requester="issuance",
            source="certificate",
            approval="Approved",
            spec={"request": ""},
        )
        Order.objects.create(
            name=f"{name}-1-order",
            request=request,
            issuer=issuers["acme"],
            spec={"dnsNames": cert.dns_names},
            state=state,
            reason=reason,
            url="" if not state else f"https://acme.example.test/order/{name}",
            server=ACME_SERVER if state else "",
            restarts=(
                [{"reason": "urn:ietf:params:acme:error:serverInternal", "at": now.isoformat()}]
                if state == "errored"
                else []
            ),
        )


def _requests(issuers: dict[str, Issuer]) -> None:
    """The approval queue: an API request, a Kubernetes CSR (own queue, dashboard), an
    unreadable CSR, and decided ones in the chains."""
    manual = issuers["manual"]
    pending_request("node-1-csr", manual)
    kube = CertificateRequest.objects.create(
        name="csr-kubelet-serving-node-2",
        issuer=manual,
        requester="system:node:node-2",
        source="kubernetes",
        spec={
            "request": csr_pem(
                "node-2.example.test",
                common_name="system:node:node-2",
                organizations=["system:nodes"],
            ),
            "usages": ["digital signature", "key encipherment", "server auth"],
        },
    )
    KubeCSR.objects.create(
        uid=str(uuid.uuid4()),
        csr_name="csr-kubelet-serving-node-2",
        request=kube,
        signer_name="example.com/serving",
        resource_version="4711",
    )
    CertificateRequest.objects.create(
        name="garbled-csr",
        issuer=manual,
        requester="ci-pipeline",
        source="api",
        spec={"request": "-----BEGIN CERTIFICATE REQUEST-----\nnot base64\n"},
    )
    CertificateRequest.objects.create(
        name="denied-request",
        issuer=manual,
        requester="ci-pipeline",
        approval="Denied",
        state="Denied",
        decided_by="approver",
        decided_at=timezone.now(),
        spec={"request": ""},
    )


def _notifications() -> None:
    now = timezone.now()
    ops = NotificationChannel.objects.create(
        name="ops-chat",
        url_ciphertext=encrypt_text("json://chat.example.test/hook"),
        url_hint="json://ch***",
    )
    NotificationChannel.objects.create(
        name="pki-team-mail-digest",
        url_ciphertext=encrypt_text("mailto://pki@example.test"),
        url_hint="mailto://pk***",
        digest_hour=7,
        enabled=False,
    )
    NotificationRule.objects.create(
        name="expiring-soon", channel=ops, condition="expiring", threshold=14, name_pattern="shop-*"
    )
    NotificationRule.objects.create(
        name="backoff", channel=ops, condition="backoff", issuer_pattern="letsencrypt-*"
    )
    NotificationRule.objects.create(name="approvals", channel=ops, condition="approval_waiting")
    for i, (state, error) in enumerate(
        (
            ("sent", ""),
            ("retrying", "HTTP 502 Bad Gateway from chat.example.test"),
            ("failed", "connection refused: chat.example.test:443 (gave up after 5 attempts)"),
            ("digest", ""),
            ("pending", ""),
        )
    ):
        Notification.objects.create(
            channel=ops,
            condition="backoff",
            subject=f"Certificate/flaky-{i}",
            instance=str(i),
            title=f"Certificate flaky-{i} entered failure backoff",
            body="The CA refused: rejectedIdentifier",
            state=state,
            attempts=5 if state == "failed" else (2 if state == "retrying" else 1),
            last_error=error,
            sent_at=now if state == "sent" else None,
            attempted_at=now - timedelta(minutes=i),
            next_attempt_at=now + timedelta(minutes=10),
        )


def _webhooks() -> None:
    now = timezone.now()
    hook = IssuanceWebhook(
        name="deploy-hook",
        url="https://deploy.example.test/hooks/certificates/with/a/rather/long/path?team=payments",
        issuer_glob="letsencrypt-*",
        certificate_glob="shop-*",
        created_by="admin",
    )
    hook.set_secret("whsec-not-shown")
    hook.save()
    off = IssuanceWebhook(name="old-receiver", url="http://10.0.0.7/hook", enabled=False)
    off.set_secret("whsec-old")
    off.save()
    attempt = {"at": now.isoformat(), "status": None, "error": "connection refused", "ms": 3}
    for revision, state, attempts in (
        (1, "Delivered", [{"at": now.isoformat(), "status": 200, "error": "", "ms": 41}]),
        (2, "Failed", [attempt] * 6),
        (3, "Pending", [{**attempt, "status": 503, "error": "Service Unavailable"}]),
        (None, "Pending", []),
    ):
        WebhookDelivery.objects.create(
            webhook=hook,
            event="issued" if revision else "test",
            certificate_name="shop-expiring" if revision else "",
            revision=revision,
            state=state,
            attempts=attempts,
            due_at=now + timedelta(minutes=10) if state == "Pending" else None,
            delivered_at=now if state == "Delivered" else None,
        )


def _users_and_tokens(certs: dict[str, Certificate], clusters: dict[str, Cluster]) -> None:
    admin = User.objects.get(username="admin")
    create_token(admin, "ci-deploy", actor="admin")
    create_token(admin, "laptop", actor="admin")
    used, _ = create_token(admin, "monitoring-with-a-rather-long-token-name", actor="admin")
    used.last_used_at = timezone.now()
    used.save()
    revoked, _ = create_token(admin, "old-script", actor="admin")
    revoked.revoked_at = timezone.now()
    revoked.save()
    gone = User.objects.create_user(username="former-employee", password="pw-former-employee")
    gone.groups.add(role_group("operator"))
    gone.is_active = False
    gone.save()
    scoped_user("team-payments", "operator", (clusters["connected"], LONG_NAMESPACE))

    web = certs["web"]
    create_download_token("web-frontends", actor="operator", certificate=web)
    token, _ = create_download_token(
        "retired-host", actor="operator", certificate=web, keystore_password="changeit"
    )
    token.revoked_at = timezone.now()
    token.save()
    create_download_token("all-web", actor="admin", name_pattern="web*")


def _bulk_actions() -> None:
    """One running (started by someone else, so the admin's page does not drive it) and one
    finished with an error."""
    now = timezone.now()
    running = BulkAction.objects.create(
        id=RUNNING_BULK, kind="renew", actor="operator", total=5, done=3, failed=1
    )
    finished = BulkAction.objects.create(
        id=FINISHED_BULK,
        kind="delete",
        actor="operator",
        delete_secrets=True,
        total=2,
        done=2,
        failed=1,
        finished_at=now,
    )
    for action, items in (
        (
            running,
            [
                ("web", "ok", ""),
                ("flaky", "ok", ""),
                ("gone", "error", "no such certificate"),
                ("service-00", "pending", ""),
                ("service-01", "pending", ""),
            ],
        ),
        (finished, [("service-02", "ok", ""), (LONG_CERTIFICATE, "error", "in use")]),
    ):
        for position, (name, state, message) in enumerate(items):
            BulkItem.objects.create(
                action=action,
                position=position,
                certificate_name=name,
                state=state,
                message=message,
                finished_at=None if state == "pending" else now,
            )


def _clusters() -> dict[str, Cluster]:
    now = timezone.now()
    connected = make_cluster(
        LONG_CLUSTER,
        context="prod-admin",
        state="Connected",
        checked_at=now - timedelta(minutes=2),
        last_sync=now - timedelta(seconds=30),
        api_versions=["cert-manager.io/v1", "acme.cert-manager.io/v1"],
        created_by="admin",
    )
    make_cluster("staging", state="Pending")
    make_cluster(
        "edge-unreachable",
        state="Unreachable",
        checked_at=now - timedelta(minutes=5),
        last_error="HTTPSConnectionPool(host='127.0.0.1', port=6443): connection refused",
    )
    make_cluster(
        "lab-unauthorized",
        state="Unauthorized",
        checked_at=now - timedelta(minutes=1),
        last_error="401 Unauthorized: the token was rejected",
        missing_permissions=[
            "watch certificates.cert-manager.io",
            "update certificates/status.cert-manager.io",
            "approve signers.cert-manager.io",
        ],
    )
    make_cluster(
        "plain-kubernetes",
        state="NoCertManager",
        checked_at=now - timedelta(minutes=3),
        last_error="no cert-manager.io API group",
    )

    ns = LONG_NAMESPACE
    ready = ready_cert(connected, ns, "checkout")
    ready_cert(connected, "default", "expiring-soon", days_left=4)
    failing = failing_cert(connected, ns, "api-gateway", attempts=4)
    failing_cert(connected, "default", "never-issued", attempts=1)
    request = pending_cr(connected, ns, "api-gateway-7", "api-gateway")
    approved = pending_cr(connected, ns, "checkout-2", "checkout")
    ClusterResource.objects.filter(pk=approved.pk).update(
        state="Approved", ready="True", reason="Issued"
    )
    denied = pending_cr(connected, "default", "never-issued-1", "never-issued")
    ClusterResource.objects.filter(pk=denied.pk).update(
        state="Denied", ready="False", reason="Denied", message="denied by approver: wrong SAN"
    )
    order = child(connected, MirroredKind.ORDER, ns, "api-gateway-7-1453", "api-gateway", "pending")
    child(connected, MirroredKind.ORDER, ns, "checkout-2-88", "checkout", "valid")
    challenge = child(
        connected, MirroredKind.CHALLENGE, ns, "api-gateway-7-1453-99", "api-gateway", "pending"
    )
    child(connected, MirroredKind.CHALLENGE, ns, "checkout-2-88-1", "checkout", "valid")
    child(
        connected,
        MirroredKind.CHALLENGE,
        "default",
        "never-issued-1-1-2",
        "never-issued",
        "invalid",
    )
    issuer = mirrored(
        connected,
        MirroredKind.ISSUER,
        ns,
        "team-ca",
        spec={"ca": {"secretName": "team-ca"}},
        status={
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "ErrGetKeyPair",
                    "message": 'secret "team-ca" not found',
                }
            ]
        },
        ready="False",
        reason="ErrGetKeyPair",
        message='secret "team-ca" not found',
    )
    cluster_issuer = mirrored(
        connected,
        MirroredKind.CLUSTER_ISSUER,
        "",
        "letsencrypt",
        spec={"acme": {"server": "https://acme-v02.api.letsencrypt.org/directory"}},
        status={
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "ACMEAccountRegistered",
                    "message": "The ACME account was registered with the ACME server",
                }
            ]
        },
        ready="True",
        reason="ACMEAccountRegistered",
    )
    for resource, reason, message, ago in (
        (failing, "Issuing", "Issuing certificate as Secret does not exist", 30),
        (request, "OrderCreated", "Created Order resource api-gateway-7-1453", 25),
        (order, "Created", "Created Challenge resource api-gateway-7-1453-99", 20),
        (challenge, "Presented", "Presented challenge using HTTP-01 challenge mechanism", 15),
        (failing, "Failed", "Failed to wait for order resource to become ready", 10),
        (ready, "Issuing", "The certificate has been successfully issued", 5),
        (issuer, "ErrInitIssuer", 'Error initializing issuer: secret "team-ca" not found', 3),
        (cluster_issuer, "ACMEAccountRegistered", "The ACME account was registered", 60),
    ):
        event(connected, resource, reason, message, ago=timedelta(minutes=ago))
    for action, kind, target, state, error in (
        ("renew", "Certificate", failing, "Pending", ""),
        (
            "renew",
            "Certificate",
            failing,
            "Failed",
            "403 Forbidden: cannot patch certificates/status",
        ),
        ("approve", "CertificateRequest", approved, "Done", ""),
        ("deny", "CertificateRequest", denied, "Done", ""),
    ):
        ClusterAction.objects.create(
            cluster=connected,
            action=action,
            kind=kind,
            namespace=target.namespace,
            name=target.name,
            uid=target.uid,
            actor="operator",
            state=state,
            last_error=error,
            done_at=timezone.now() if state == "Done" else None,
        )
    return {"connected": connected}


def _signin_locks() -> None:
    """A locked account and address on the sign-in locks page (django-axes' rows)."""
    from axes.models import AccessAttempt
    from django.conf import settings
    from django.utils import timezone

    AccessAttempt.objects.create(
        username="service-account-for-the-payments-gateway-deployment-pipeline",
        ip_address="203.0.113.7",
        user_agent="curl/8",
        get_data="",
        post_data="",
        http_accept="*/*",
        path_info="/login/",
        failures_since_start=settings.AXES_FAILURE_LIMIT,
        attempt_time=timezone.now(),
    )


def _sso_identities() -> None:
    """Accounts linked to an OpenID Provider (Users → Single sign-on lists them): a
    provider's `sub` is often a UUID or a long number."""
    from issuance.models.oidc import OidcIdentity

    issuer = "https://sso.example.test/realms/operations"
    for username, subject, signed_in in (
        ("admin", "f3c1a2e4-9b7d-4c1e-8a55-2d6b0e9c7f31", True),
        ("viewer", "110169484474386276334", False),
    ):
        OidcIdentity.objects.create(
            user=User.objects.get(username=username),
            issuer=issuer,
            subject=subject,
            last_sign_in=timezone.now() - timedelta(hours=3) if signed_in else None,
        )


def _audit_log() -> None:
    """Entries of every kind the audit log links (and some it does not), with actors."""
    for kind, name, cert, reason, message, actor, type_ in (
        ("Certificate", "web", "web", "RenewRequested", "Force renew", "operator", "Normal"),
        (
            "Certificate",
            "flaky",
            "flaky",
            "Failed",
            "The CA refused: rejectedIdentifier",
            "",
            "Warning",
        ),
        ("CertificateRequest", "node-1-csr", "", "Denied", "wrong SAN", "approver", "Normal"),
        (
            "Order",
            "order-invalid-1-order",
            "order-invalid",
            "Invalid",
            "rejectedIdentifier",
            "",
            "Warning",
        ),
        ("Challenge", "shop-expiring-1-order-chal", "", "Presented", "HTTP-01 token", "", "Normal"),
        ("Issuer", LONG_ISSUER, "", "PolicyChanged", "approval policy edited", "admin", "Normal"),
        (
            "Cluster",
            LONG_CLUSTER,
            "",
            "ClusterAdded",
            "added with context prod-admin",
            "admin",
            "Normal",
        ),
        (
            "User",
            "former-employee",
            "",
            "UserDisabled",
            "sessions and tokens stopped",
            "admin",
            "Normal",
        ),
        (
            "Revocation",
            "revoked-by-ops-4f2a9c",
            "revoked-by-ops",
            "Revoked",
            "keyCompromise",
            "operator",
            "Normal",
        ),
    ):
        Event.objects.create(
            kind=kind,
            name=name,
            certificate_name=cert,
            reason=reason,
            message=message,
            actor=actor,
            type=type_,
        )


def _endpoints(web: Certificate) -> None:
    """The Endpoints card of `web`: one serving the current revision with its chain, one an
    older revision past the hour (Deployed: stale), one refused, one not probed yet."""
    now = timezone.now()
    pem = Secret.objects.get(name="web-tls").tls_crt
    # Revision 3 current, so the stale endpoint's revision 2 reads as one behind.
    Certificate.objects.filter(pk=web.pk).update(revision=3)
    base: dict[str, Any] = {
        "probedAt": now.isoformat(),
        "durationMs": 12,
        "error": "",
        "errorKind": "",
        "tlsVersion": "TLSv1.3",
        "fingerprintSha256": "ab" * 32,
        "serial": "1f2e3d",
        "subject": "CN=web.example.test",
        "issuer": "CN=web.example.test",
        "notAfter": (now + timedelta(days=60)).isoformat(),
        "expired": False,
        "chainVerified": True,
        "chainError": "",
        "hostnameMatch": True,
        "chain": [pem],
    }
    current = {**base, "match": "current", "revision": 3, "behind": 0}
    older = {
        **base,
        "match": "previous",
        "revision": 2,
        "behind": 1,
        "serial": "0a9b8c",
        "hostnameMatch": False,
    }
    refused = {
        **base,
        "match": "error",
        "revision": None,
        "behind": None,
        "errorKind": "refused",
        "error": "connection refused by web-3.example.test:443",
        "chain": [],
    }
    rows = (
        ("web-1.example.test", current, "current", 3),
        ("web-2.example.test", older, "previous", 2),
        ("web-3.example.test", refused, "error", None),
        ("web-4.example.test", None, "", None),
    )
    for host, probe, match, revision in rows:
        Endpoint.objects.create(
            certificate=web,
            host=host,
            port=443,
            protocol="tls",
            probed_at=now if probe else None,
            last_probe=probe,
            match=match,
            served_revision=revision,
            created_at=now - timedelta(hours=3),
            revision_issued_at=now - timedelta(hours=2),
            next_probe_at=now
            + (timedelta(hours=5) if match == "current" else timedelta(minutes=8)),
        )


def seed_console() -> None:
    """Make the rich console. Needs the role users of the `role_users` fixture (the admin's
    API tokens are made here); PAGES are the pages to check."""
    issuers = _issuers()
    certs = _certificates(issuers)
    _acme_chains(issuers, certs)
    _requests(issuers)
    _notifications()
    _webhooks()
    clusters = _clusters()
    _users_and_tokens(certs, clusters)
    _endpoints(certs["web"])
    _bulk_actions()
    _signin_locks()
    _sso_identities()
    _audit_log()
