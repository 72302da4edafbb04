"""Builders of rows for tests, made directly (bypassing the API and the controllers on purpose,
so each rule can be checked in isolation). The one home of each builder: test packages
import them from here. Waiting and draining helpers are in tests/helpers.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import Group, User
from django.utils import timezone

from issuance.models import (
    Certificate,
    CertificateRequest,
    Challenge,
    Cluster,
    Endpoint,
    Issuer,
    Order,
    RoleScope,
    Secret,
)
from issuance.pki.csr import build_csr
from issuance.pki.keys import generate_private_key, private_key_to_pem
from issuance.pki.signing import sign_csr
from issuance.shapes import CertificateNames


def make_selfsigned_issuer(name: str = "selfsigned", **spec: Any) -> Issuer:
    return Issuer.objects.create(name=name, kind="selfSigned", spec={"selfSigned": spec})


def make_ca_secret(name: str = "test-ca", common_name: str = "Test CA") -> Secret:
    key = generate_private_key({"algorithm": "ECDSA", "size": 256})
    csr = build_csr(key, {"commonName": common_name})
    cert = sign_csr(csr, key, None, duration=timedelta(days=3650), now=timezone.now(), is_ca=True)
    secret = Secret(name=name, tls_crt=cert, ca_crt=cert)
    secret.tls_key = private_key_to_pem(key)
    secret.save()
    return secret


def make_ca_issuer(name: str = "ca", secret_name: str = "test-ca", **ca: Any) -> Issuer:
    if not Secret.objects.filter(name=secret_name).exists():
        make_ca_secret(secret_name)
    return Issuer.objects.create(
        name=name, kind="ca", spec={"ca": {"secretName": secret_name, **ca}}
    )


def make_certificate(name: str, issuer: Issuer, **spec: Any) -> Certificate:
    full = {
        "secretName": name + "-tls",
        "dnsNames": [f"{name}.example.test"],
        "issuerRef": {"name": issuer.name, "kind": "Issuer"},
        **spec,
    }
    cert = Certificate(name=name, issuer=issuer, spec=full, secret_name=full["secretName"])
    cert.refresh_search_text()
    cert.due_at = timezone.now()
    cert.save()
    return cert


def make_acme_issuer(name: str = "acme", server: str = "https://ca.invalid/dir") -> Issuer:
    return Issuer.objects.create(
        name=name, kind="acme", spec={"acme": {"server": server, "solvers": [{"http01": {}}]}}
    )


_seq = itertools.count(1)


def make_order(
    owner: Issuer | CertificateRequest,
    name: str | None = None,
    *,
    with_certificate: bool = True,
    challenges: int = 0,
    processing: int = 0,
) -> Order:
    """An Order (not yet created at the CA) for `owner`: an existing request, or for an issuer
    a new request (of a new Certificate of the same name unless `with_certificate=False`).

    `challenges`: that many http-01 Challenges named `<order>-<i>`, queued in that order; the
    first `processing` of them processing (scheduled, state pending).
    """
    name = name or f"order-{next(_seq)}"
    if isinstance(owner, CertificateRequest):
        request = owner
    else:
        certificate = make_certificate(name, owner) if with_certificate else None
        request = CertificateRequest.objects.create(
            name=name,
            issuer=owner,
            certificate=certificate,
            revision=1 if certificate else None,
            spec={"request": ""},
        )
    order = Order.objects.create(name=name, request=request, issuer=request.issuer, spec={})
    start = timezone.now() - timedelta(minutes=1)
    for i in range(challenges):
        running = i < processing
        make_challenge(
            order,
            f"{name}-{i}.example.test",
            name=f"{name}-{i}",
            created_at=start + timedelta(seconds=i),
            processing=running,
            scheduled_at=start if running else None,
            state="pending" if running else "",
        )
    return order


def make_challenge(
    order: Order,
    dns_name: str,
    type_: str = "http-01",
    *,
    name: str | None = None,
    created_at: datetime | None = None,
    token: str | None = None,
    solver: dict[str, Any] | None = None,
    key: str | None = None,
    **fields: Any,
) -> Challenge:
    """A Challenge of `order` as the orders controller makes it (queued unless `fields` say
    otherwise), with a spec a solver can use."""
    n = next(_seq)
    token = token or f"tok{n}"
    spec: dict[str, Any] = {
        "authorizationURL": f"https://ca.invalid/authz/{n}",
        "url": f"https://ca.invalid/chall/{n}",
        "dnsName": dns_name,
        "wildcard": False,
        "type": type_,
        "token": token,
        "key": key or f"{token}.thumbprint",
        "solver": solver or ({"http01": {}} if type_ == "http-01" else {}),
        "issuerRef": {"name": order.issuer.name, "kind": "Issuer"},
    }
    return Challenge.objects.create(
        name=name or f"chal-{n}",
        order=order,
        issuer=order.issuer,
        dns_name=dns_name,
        type=type_,
        authorization_url=spec["authorizationURL"],
        token=token,
        spec=spec,
        created_at=created_at or timezone.now(),
        **fields,
    )


def queue(order: Order, names: list[str], start: datetime | None = None) -> list[Challenge]:
    """Queued http-01 challenges for `names`, one second apart (oldest first)."""
    start = start or timezone.now() - timedelta(hours=1)
    return [
        make_challenge(order, name, created_at=start + timedelta(seconds=i))
        for i, name in enumerate(names)
    ]


def csr_pem(
    *dns_names: str,
    common_name: str = "",
    ip_addresses: Sequence[str] = (),
    organizations: Sequence[str] = (),
) -> str:
    """A PEM CSR with a new ECDSA P-256 key; for `ext.example.test` when it names nothing."""
    spec: CertificateNames = {"dnsNames": list(dns_names), "ipAddresses": list(ip_addresses)}
    if not (dns_names or common_name or ip_addresses):
        spec["dnsNames"] = ["ext.example.test"]
    if common_name:
        spec["commonName"] = common_name
    if organizations:
        spec["subject"] = {"organizations": list(organizations)}
    return build_csr(generate_private_key({"algorithm": "ECDSA", "size": 256}), spec)


def role_group(role: str) -> Group:
    """The role's group. A data migration makes them, but a transactional test's flush removes
    them for the tests after it: made here when missing."""
    return Group.objects.get_or_create(name=role)[0]


# A kubeconfig that loads but points nowhere: for Cluster rows whose tests need no cluster.
NOWHERE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def make_cluster(name: str, kubeconfig: str = NOWHERE_KUBECONFIG, **fields: Any) -> Cluster:
    """A Cluster row (kubeconfig stored encrypted, as every way of adding one does)."""
    cluster = Cluster(name=name, **fields)
    cluster.kubeconfig = kubeconfig
    cluster.save()
    return cluster


def scoped_user(username: str, role: str, *scopes: tuple[Cluster, str]) -> User:
    """A user holding `role`, limited to (cluster, namespace) pairs when any are given
    ("" = the whole cluster)."""
    user = User.objects.create_user(username=username, password="pw-" + username)
    user.groups.add(role_group(role))
    for cluster, namespace in scopes:
        RoleScope.objects.create(user=user, cluster=cluster, namespace=namespace)
    return user


# What a probe stores (issuance/probing/assess.py) for each state of an endpoint, set straight
# on the row by tests of what is read from the probes (the probing is tested in
# tests/probing/ against real servers).
_PROBED_MATCH = {
    "Deployed": "current",
    "Stale": "previous",
    "Deploying": "previous",
    "Mismatch": "foreign",
    "Unreachable": "error",
    "Unchecked": "",
}


def make_endpoint(
    cert: Certificate,
    host: str,
    state: str,
    *,
    now: datetime | None = None,
    port: int = 443,
    **probe: Any,
) -> Endpoint:
    """An endpoint of `cert` whose last probe puts it in `state` (deployment.state_of's
    words) at `now`; `probe` overrides fields of the stored probe record."""
    now = now or timezone.now()
    match = _PROBED_MATCH[state]
    # Stale: the current revision was issued two hours ago; Deploying: ten minutes ago.
    issued = now - (timedelta(hours=2) if state != "Deploying" else timedelta(minutes=10))
    record: dict[str, Any] | None = None
    if match:
        record = {
            "probedAt": now.isoformat(),
            "durationMs": 12,
            "match": match,
            "revision": {"current": 2, "previous": 1}.get(match),
            "behind": {"current": 0, "previous": 1}.get(match),
            "error": "connection refused" if match == "error" else "",
            "errorKind": "refused" if match == "error" else "",
            "tlsVersion": "" if match == "error" else "TLSv1.3",
            "fingerprintSha256": "" if match == "error" else f"{host}-{match}".ljust(64, "0"),
            "serial": "" if match == "error" else "1a2b",
            "subject": "" if match == "error" else f"CN={host}",
            "issuer": "" if match == "error" else "CN=test CA",
            "notAfter": None if match == "error" else "2027-06-01T00:00:00Z",
            "expired": False,
            "chainVerified": match != "error",
            "chainError": "",
            "hostnameMatch": match != "error",
            "chain": [],
            **probe,
        }
    return Endpoint.objects.create(
        certificate=cert,
        host=host,
        port=port,
        created_at=now - timedelta(days=1),
        revision_issued_at=issued,
        probed_at=now if match else None,
        last_probe=record,
        match=match,
        served_revision=record["revision"] if record else None,
        served_fingerprint=record["fingerprintSha256"] if record else "",
        served_since=now if match else None,
    )
