"""The permission matrix, generated from the one table (issuance.access.permissions).

Every rule of the table × every kind of user, on both surfaces that offer it: the REST API
and the console's pages. A user the table allows gets the case's success status (2xx/3xx,
or the state conflict a few cases document); a refused one gets 403 with a body naming the
role the action needs, and nothing changes; anonymous requests get 401 (API) or the login
page (console). The users include users scoped to a cluster or a namespace
(issuance.access.scope): console-wide rules refuse them, in-scope rules allow them on the
objects of their scope (the mirrored objects below are all in `prod/team-a`).

The expectation is worked out here from the table with the roles' expansion written out
again (admin holds every role, operator and approver hold viewer), so a change of the
table changes the tests, and a change of a view that stops following the table fails them.
`test_every_rule_has_cases` and the two coverage tests keep the cases and the table, and
the table and the routes, in step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from rest_framework.test import APIClient

from issuance.access import apitokens, permissions
from issuance.access.permissions import CONSOLE_WIDE, RULES, Rule
from issuance.delivery.downloadtokens import create_download_token
from issuance.models import (
    Certificate,
    CertificateRequest,
    Cluster,
    Endpoint,
    Event,
    IssuanceWebhook,
    Issuer,
    NotificationChannel,
    NotificationRule,
    Secret,
)
from tests.factories import (
    csr_pem,
    make_ca_issuer,
    make_certificate,
    make_cluster,
    make_selfsigned_issuer,
    scoped_user,
)
from tests.web.mirror_builders import pending_cr, ready_cert

pytestmark = pytest.mark.django_db

# Who makes the request: a role held console-wide, a role scoped to clusters/namespaces, no
# role, or nobody signed in.
USERS = (
    "viewer",
    "operator",
    "approver",
    "admin",
    "nobody",
    "scoped-viewer",
    "scoped-operator",
    "scoped-approver",
    "anonymous",
)
# Written out again on purpose (issuance.access.roles has the code's copy).
HOLDS = {
    "viewer": {"viewer"},
    "operator": {"viewer", "operator"},
    "approver": {"viewer", "approver"},
    "admin": {"viewer", "operator", "approver", "admin"},
    "nobody": set(),
}


def allowed(rule: Rule, who: str) -> bool:
    """What the table says about `who` (the objects the cases touch are in their scope)."""
    if who == "anonymous":
        return False
    if not rule.roles:
        return True  # any signed-in user
    scoped = who.startswith("scoped-")
    if scoped and rule.reach == CONSOLE_WIDE:
        return False
    return bool(HOLDS[who.removeprefix("scoped-")] & set(rule.roles))


@dataclass(frozen=True)
class Case:
    method: str
    url: str
    body: dict[str, Any] | None = None
    ok: tuple[int, ...] = (200,)  # the statuses of an allowed request
    label: str = ""

    def id(self, rule: Rule) -> str:
        return f"{rule.resource}:{rule.action}:{self.method}:{self.label or self.url}"


@dataclass
class World:
    users: dict[str, User] = field(default_factory=dict)
    ids: dict[str, Any] = field(default_factory=dict)


CERT_SPEC = {"dnsNames": ["new.example.test"], "issuerRef": {"name": "ss"}}
WEB_SPEC = {"dnsNames": ["web2.example.test"], "issuerRef": {"name": "ss"}}
MIRROR = "/clusters/prod/team-a"
API_MIRROR = "/api/v1/clusters/prod/namespaces/team-a"

# (resource, action) -> the API requests that need it.
API: dict[tuple[str, str], list[Case]] = {
    ("issuer", "read"): [Case("get", "/api/v1/issuers/"), Case("get", "/api/v1/issuers/ss/")],
    ("issuer", "create"): [
        Case("post", "/api/v1/issuers/", {"name": "new-issuer", "spec": {"selfSigned": {}}}, (201,))
    ],
    ("issuer", "change"): [
        Case("put", "/api/v1/issuers/spare/", {"spec": {"selfSigned": {"maxDuration": "24h"}}}),
        Case(
            "patch",
            "/api/v1/issuers/ca/",
            {"spec": {"approvalPolicy": {"rules": {"maxDnsSans": 3}}}},
            label="approval-policy",
        ),
    ],
    ("issuer", "delete"): [Case("delete", "/api/v1/issuers/spare/", ok=(204,))],
    # No dns01 solver on "ss": the allowed answer is the documented 409.
    ("issuer", "test-dns"): [
        Case("post", "/api/v1/issuers/ss/test-dns/", {"dnsName": "a.example.test"}, (409,))
    ],
    ("certificate", "read"): [
        Case("get", "/api/v1/certificates/"),
        Case("get", "/api/v1/certificates/web/"),
    ],
    ("certificate", "create"): [
        Case("post", "/api/v1/certificates/", {"name": "new-cert", "spec": CERT_SPEC}, (201,))
    ],
    ("certificate", "change"): [
        Case("put", "/api/v1/certificates/web/", {"spec": WEB_SPEC}),
        Case("patch", "/api/v1/certificates/web/", {"spec": {"dnsNames": ["w.example.test"]}}),
    ],
    ("certificate", "delete"): [Case("delete", "/api/v1/certificates/web/", ok=(204,))],
    ("certificate", "renew"): [Case("post", "/api/v1/certificates/web/renew/", ok=(202,))],
    # "web" is self-signed: the allowed answer is the documented 409 (no CA to revoke at).
    ("certificate", "revoke"): [
        Case("post", "/api/v1/certificates/web/revoke/", {"reason": "superseded"}, (409,))
    ],
    ("certificate", "read-key"): [Case("get", "/api/v1/certificates/web/secret/")],
    ("endpoint", "read"): [Case("get", "/api/v1/certificates/web/endpoints/")],
    ("endpoint", "create"): [
        Case(
            "post",
            "/api/v1/certificates/web/endpoints/",
            {"host": "new.example.test", "port": 8443},
            (201,),
        )
    ],
    ("endpoint", "delete"): [
        Case("delete", "/api/v1/certificates/web/endpoints/{endpoint}/", ok=(204,))
    ],
    ("endpoint", "check"): [Case("post", "/api/v1/certificates/web/check-endpoints/", ok=(202,))],
    ("download-token", "read"): [Case("get", "/api/v1/downloadtokens/")],
    ("download-token", "create"): [
        Case("post", "/api/v1/downloadtokens/", {"name": "ci", "certificate": "web"}, (201,))
    ],
    ("download-token", "revoke"): [Case("post", "/api/v1/downloadtokens/{download}/revoke/")],
    ("certificate-request", "read"): [
        Case("get", "/api/v1/certificaterequests/"),
        Case("get", "/api/v1/certificaterequests/ext-1/"),
    ],
    ("certificate-request", "create"): [
        Case(
            "post",
            "/api/v1/certificaterequests/",
            {"name": "new-cr", "spec": {"request": "{csr}", "issuerRef": {"name": "ca"}}},
            (201,),
        )
    ],
    # Requests are immutable: the allowed answer is the documented 409.
    ("certificate-request", "change"): [
        Case("patch", "/api/v1/certificaterequests/ext-1/", {"spec": {"duration": "1h"}}, (409,))
    ],
    ("certificate-request", "delete"): [
        Case("delete", "/api/v1/certificaterequests/ext-1/", ok=(204,))
    ],
    ("certificate-request", "approve"): [
        Case("post", "/api/v1/certificaterequests/ext-1/approve/", {"reason": "Checked"})
    ],
    ("certificate-request", "deny"): [
        Case("post", "/api/v1/certificaterequests/ext-1/deny/", {"reason": "Unknown"})
    ],
    ("order", "read"): [Case("get", "/api/v1/orders/")],
    ("challenge", "read"): [Case("get", "/api/v1/challenges/")],
    ("dashboard", "read"): [Case("get", "/api/v1/scheduler/"), Case("get", "/api/v1/stats/")],
    ("event", "read"): [Case("get", "/api/v1/events/")],
    ("notification-channel", "read"): [Case("get", "/api/v1/notification-channels/")],
    ("notification-channel", "create"): [
        Case(
            "post",
            "/api/v1/notification-channels/",
            {"name": "new-chan", "url": "json://new.example.test/hook"},
            (201,),
        )
    ],
    ("notification-channel", "change"): [
        Case("patch", "/api/v1/notification-channels/ops/", {"enabled": False})
    ],
    ("notification-channel", "delete"): [
        Case("delete", "/api/v1/notification-channels/spare-chan/", ok=(204,))
    ],
    ("notification-channel", "send-test"): [
        Case("post", "/api/v1/notification-channels/ops/test/", ok=(202,))
    ],
    ("notification-rule", "read"): [Case("get", "/api/v1/notification-rules/")],
    ("notification-rule", "create"): [
        Case(
            "post",
            "/api/v1/notification-rules/",
            {"name": "new-rule", "channel": "ops", "condition": "issuance_failed"},
            (201,),
        )
    ],
    ("notification-rule", "change"): [
        Case("patch", "/api/v1/notification-rules/{rule}/", {"enabled": False})
    ],
    ("notification-rule", "delete"): [
        Case("delete", "/api/v1/notification-rules/{rule}/", ok=(204,))
    ],
    ("issuance-webhook", "read"): [Case("get", "/api/v1/issuance-webhooks/")],
    ("issuance-webhook", "create"): [
        Case(
            "post",
            "/api/v1/issuance-webhooks/",
            {"name": "new-hook", "url": "https://hooks.example.test/new", "secret": "s" * 32},
            (201,),
        )
    ],
    ("issuance-webhook", "delete"): [Case("delete", "/api/v1/issuance-webhooks/kept/", ok=(204,))],
    ("issuance-webhook", "send-test"): [
        Case("post", "/api/v1/issuance-webhooks/kept/test/", ok=(202,))
    ],
    ("webhook-delivery", "read"): [Case("get", "/api/v1/issuance-webhook-deliveries/")],
    ("user", "read"): [Case("get", "/api/v1/users/"), Case("get", "/api/v1/users/target/")],
    ("user", "create"): [
        Case("post", "/api/v1/users/", {"username": "newbie", "roles": ["viewer"]}, (201,))
    ],
    ("user", "change"): [Case("patch", "/api/v1/users/target/", {"roles": ["operator"]})],
    ("user", "reset-password"): [Case("post", "/api/v1/users/target/reset-password/", {})],
    ("user", "reset-second-factor"): [
        Case("post", "/api/v1/users/target/reset-second-factor/", {})
    ],
    ("signin-lock", "read"): [Case("get", "/api/v1/signin-locks/")],
    ("sso-group-rule", "read"): [Case("get", "/api/v1/sso/group-rules/")],
    ("sso-group-rule", "change"): [Case("put", "/api/v1/sso/group-rules/", {"rules": []})],
    # No lock to lift: the allowed answer is 404.
    ("signin-lock", "lift"): [
        Case("delete", "/api/v1/signin-locks/account:nobody-here/", ok=(404,))
    ],
    ("api-token", "read"): [Case("get", "/api/v1/tokens/")],
    ("api-token", "create"): [Case("post", "/api/v1/tokens/", {"name": "laptop"}, (201,))],
    ("api-token", "revoke"): [Case("post", "/api/v1/tokens/{token}/revoke/")],
    ("cluster", "read"): [Case("get", "/api/v1/clusters/"), Case("get", "/api/v1/clusters/prod/")],
    ("cluster", "check"): [Case("post", "/api/v1/clusters/prod/check/", ok=(202,))],
    ("cluster", "create"): [
        Case("post", "/api/v1/clusters/", {"name": "new-cluster"}, (400,), label="bad-body")
    ],
    ("cluster", "change"): [Case("patch", "/api/v1/clusters/prod/", {"minBackoffSeconds": 30})],
    ("cluster", "delete"): [Case("delete", "/api/v1/clusters/prod/", ok=(204,))],
    ("mirrored-object", "read"): [
        Case("get", f"{API_MIRROR}/certificates/"),
        Case("get", f"{API_MIRROR}/certificates/web/"),
    ],
    ("mirrored-object", "renew"): [
        Case("post", f"{API_MIRROR}/certificates/web/renew/", ok=(202,))
    ],
    ("mirrored-object", "approve"): [
        Case("post", f"{API_MIRROR}/certificaterequests/web-1/approve/", {}, (202,))
    ],
    ("mirrored-object", "deny"): [
        Case("post", f"{API_MIRROR}/certificaterequests/web-1/deny/", {}, (202,))
    ],
    ("cluster-action", "read"): [Case("get", "/api/v1/clusters/prod/actions/")],
    ("api-root", "read"): [Case("get", "/api/v1/")],
}

OK = (200, 302)
# (resource, action) -> the console requests that need it.
CONSOLE: dict[tuple[str, str], list[Case]] = {
    ("issuer", "read"): [
        Case("get", "/issuers/"),
        Case("get", "/partials/issuers/"),
        Case("get", "/issuers/ca/files/ca.pem"),
    ],
    ("issuer", "create"): [
        Case("get", "/new-issuer/"),
        Case("post", "/new-issuer/directory/", {"server": ""}, (200, 400)),
    ],
    ("issuer", "change"): [Case("get", "/issuers/spare/edit/")],
    ("issuer", "delete"): [Case("get", "/issuers/spare/delete/")],
    ("issuer", "test-dns"): [Case("post", "/issuers/ss/test-dns/", {"dns_name": "a.test"}, OK)],
    ("approval-policy", "read"): [Case("get", "/issuers/ca/policy/")],
    ("approval-policy", "change"): [Case("post", "/issuers/ca/policy/", {}, (200, 302, 400))],
    ("approval-policy", "preview"): [Case("post", "/issuers/ca/policy/preview/", {}, (200, 400))],
    ("certificate", "read"): [
        Case("get", "/certificates/"),
        Case("get", "/partials/certificates/"),
        Case("get", "/certificates/web/"),
        Case("get", "/certificates/web/files/cert.pem"),
        Case("get", "/certificates/web/files/fullchain.pem"),
    ],
    ("certificate", "read-key"): [
        Case("get", "/certificates/web/files/key/"),
        Case("post", "/certificates/web/files/key/key.pem", {}),
        Case(
            "post",
            "/certificates/web/files/key/bundle.p12",
            {"password": "correct horse", "confirm": "correct horse"},
        ),
    ],
    ("certificate", "create"): [
        Case("get", "/new-certificate/"),
        Case("get", "/certificates/web/clone/"),
    ],
    ("certificate", "change"): [Case("get", "/certificates/web/edit/")],
    ("certificate", "delete"): [Case("get", "/certificates/web/delete/")],
    ("certificate", "renew"): [Case("post", "/certificates/web/renew/", {}, (302,))],
    ("certificate", "revoke"): [Case("get", "/certificates/web/revoke/")],
    ("certificate", "bulk"): [Case("post", "/bulk/", {}, (302, 400))],
    ("endpoint", "create"): [
        Case("post", "/certificates/web/endpoints/", {"address": "new.example.test:8443"}, (302,))
    ],
    ("endpoint", "delete"): [
        Case("post", "/certificates/web/endpoints/{endpoint}/remove/", {}, (302,))
    ],
    ("endpoint", "check"): [Case("post", "/certificates/web/endpoints/check/", {}, (302,))],
    ("download-token", "read"): [Case("get", "/certificates/web/downloads/")],
    ("download-token", "create"): [
        Case("post", "/certificates/web/downloads/", {"name": "ci"}, (302,))
    ],
    ("download-token", "revoke"): [
        Case("post", "/certificates/web/downloads/{download}/revoke/", {}, (302,))
    ],
    ("certificate-request", "read"): [
        Case("get", "/requests/"),
        Case("get", "/partials/requests/"),
    ],
    ("certificate-request", "approve"): [
        Case("post", "/requests/ext-1/approve/", {"reason": "Checked"}, (302,))
    ],
    ("certificate-request", "deny"): [
        Case("post", "/requests/ext-1/deny/", {"reason": "Unknown"}, (302,))
    ],
    ("order", "read"): [Case("get", "/orders/"), Case("get", "/partials/orders/")],
    ("challenge", "read"): [Case("get", "/challenges/"), Case("get", "/partials/challenges/")],
    ("dashboard", "read"): [Case("get", "/")],
    ("event", "read"): [Case("get", "/audit/"), Case("get", "/audit/export.csv")],
    ("notification-channel", "read"): [Case("get", "/notifications/")],
    ("notification-channel", "create"): [
        Case(
            "post",
            "/notifications/channels/new/",
            {"name": "new-chan", "url": "json://new.example.test/hook", "rate_limit_per_hour": 10},
            (302,),
        )
    ],
    ("notification-channel", "change"): [
        Case("get", "/notifications/channels/ops/edit/"),
        Case("post", "/notifications/channels/ops/toggle/", {}, (302,)),
    ],
    ("notification-channel", "delete"): [
        Case("post", "/notifications/channels/spare-chan/delete/", {}, (302,))
    ],
    ("notification-channel", "send-test"): [
        Case("post", "/notifications/channels/ops/test/", {}, (302,))
    ],
    ("notification-rule", "create"): [
        Case(
            "post",
            "/notifications/rules/new/",
            {"name": "new-rule", "channel": "ops", "condition": "issuance_failed"},
            (302,),
        )
    ],
    ("notification-rule", "delete"): [
        Case("post", "/notifications/rules/{rule_pk}/delete/", {}, (302,))
    ],
    ("issuance-webhook", "read"): [Case("get", "/webhooks/")],
    ("issuance-webhook", "create"): [
        Case(
            "post",
            "/webhooks/new/",
            {"name": "new-hook", "url": "https://hooks.example.test/new"},
            (302,),
        )
    ],
    ("issuance-webhook", "delete"): [Case("post", "/webhooks/kept/delete/", {}, (302,))],
    ("issuance-webhook", "send-test"): [Case("post", "/webhooks/kept/test/", {}, (302,))],
    ("user", "read"): [Case("get", "/users/")],
    ("user", "create"): [
        Case("post", "/users/new/", {"username": "newbie", "roles": ["viewer"]}, (302,))
    ],
    ("user", "change"): [
        Case("post", "/users/{target}/roles/", {"roles": ["operator"]}, (302,)),
        Case("post", "/users/{target}/scopes/", {"scopes": ""}, (302,)),
        Case("post", "/users/{target}/disable/", {}, (302,)),
        Case("post", "/users/{target}/enable/", {}, (302,)),
    ],
    ("user", "reset-password"): [Case("post", "/users/{target}/password/reset/", {}, (302,))],
    ("user", "reset-second-factor"): [
        Case("post", "/users/{target}/two-factor/reset/", {}, (302,))
    ],
    # One's own account: any signed-in user (the forms themselves are in test_two_factor.py).
    ("account", "read"): [
        Case("get", "/account/security/"),
        Case("get", "/account/two-factor/recovery-codes/", ok=(200, 302)),
    ],
    ("account", "change"): [
        Case("get", "/account/password/"),
        Case("get", "/account/two-factor/setup/"),
    ],
    ("signin-lock", "read"): [Case("get", "/users/locks/")],
    ("sso-group-rule", "read"): [Case("get", "/users/sso/")],
    ("sso-group-rule", "change"): [Case("post", "/users/sso/", {"rules": ""}, (302,))],
    ("signin-lock", "lift"): [Case("post", "/users/locks/lift/", {}, (302,))],
    ("api-token", "read"): [Case("get", "/account/tokens/")],
    ("api-token", "create"): [Case("post", "/account/tokens/new/", {"name": "laptop"}, (302,))],
    ("api-token", "revoke"): [Case("post", "/account/tokens/{token}/revoke/", {}, (302,))],
    ("cluster", "read"): [
        Case("get", "/clusters/"),
        Case("get", "/partials/clusters/"),
        Case("get", "/clusters/prod/"),
        Case("get", "/partials/cluster/prod/"),
    ],
    ("cluster", "check"): [Case("post", "/clusters/prod/check/", {}, (302,))],
    ("cluster", "create"): [
        Case("get", "/new-cluster/"),
        Case("post", "/new-cluster/", {"name": "other"}, (200, 400)),
        Case("post", "/new-cluster/contexts/", {"kubeconfig": ""}, (200, 400)),
    ],
    ("cluster", "change"): [
        Case("get", "/clusters/prod/edit/"),
        Case("post", "/clusters/prod/edit/", {"name": "prod"}, (200, 302, 400)),
    ],
    ("cluster", "delete"): [
        Case("get", "/clusters/prod/delete/"),
        Case("post", "/clusters/prod/delete/", {}, (302,)),
    ],
    ("mirrored-object", "read"): [
        Case("get", f"{MIRROR}/certificates/web/"),
        Case("get", f"{MIRROR}/certificaterequests/web-1/"),
        Case("get", f"/partials{MIRROR}/certificates/web/timeline/"),
        Case("get", f"/partials{MIRROR}/certificaterequests/web-1/"),
    ],
    ("mirrored-object", "renew"): [Case("post", f"{MIRROR}/certificates/web/renew/", {}, (302,))],
    ("mirrored-object", "approve"): [
        Case("post", f"{MIRROR}/certificaterequests/web-1/approve/", {}, (302,))
    ],
    ("mirrored-object", "deny"): [
        Case("post", f"{MIRROR}/certificaterequests/web-1/deny/", {}, (302,))
    ],
}


def _params(surface: dict[tuple[str, str], list[Case]], offered: str) -> list[Any]:
    params = []
    for rule in RULES:
        if not getattr(rule, offered):
            continue
        for case in surface.get((rule.resource, rule.action), []):
            for who in USERS:
                params.append(pytest.param(rule, case, who, id=f"{case.id(rule)}:{who}"))
    return params


@pytest.fixture
def world(db: None, make_user: Callable[..., User]) -> World:
    ss = make_selfsigned_issuer("ss")
    ca = make_ca_issuer("ca", secret_name="ca-key-pair")
    make_selfsigned_issuer("spare")
    web = make_certificate("web", ss)
    tls = Secret.objects.get(name="ca-key-pair")
    stored = Secret(name=web.secret_name, tls_crt=tls.tls_crt, ca_crt=tls.ca_crt, certificate=web)
    stored.tls_key = tls.tls_key
    stored.save()
    CertificateRequest.objects.create(
        name="ext-1",
        issuer=ca,
        spec={"request": csr_pem(), "issuerRef": {"name": "ca", "kind": "Issuer"}},
        requester="someone",
        source="api",
    )
    prod = make_cluster("prod")
    ready_cert(prod, "team-a", "web")
    pending_cr(prod, "team-a", "web-1", "web")
    for name in ("ops", "spare-chan"):
        channel = NotificationChannel(name=name)
        channel.url = f"json://{name}.example.test/hook"
        channel.save()
    rule = NotificationRule.objects.create(
        name="ops-failing",
        channel=NotificationChannel.objects.get(name="ops"),
        condition="issuance_failed",
    )
    IssuanceWebhook.objects.create(
        name="kept", url="https://hooks.example.test/kept", secret_ciphertext="x"
    )
    download, _ = create_download_token("ci-old", actor="test", certificate=web)
    endpoint = Endpoint.objects.create(certificate=web, host="web.example.test", port=443)
    users = {role: make_user(role, role) for role in HOLDS if role != "nobody"}
    users["nobody"] = make_user("nobody")
    users["scoped-viewer"] = scoped_user("scoped-viewer", "viewer", (prod, "team-a"))
    # The whole cluster: a re-check needs the operator role for all of it.
    users["scoped-operator"] = scoped_user("scoped-operator", "operator", (prod, ""))
    users["scoped-approver"] = scoped_user("scoped-approver", "approver", (prod, "team-a"))
    target = make_user("target", "viewer")
    return World(
        users=users,
        ids={
            "rule": rule.name,
            "rule_pk": rule.pk,
            "download": download.pk,
            "endpoint": endpoint.pk,
            "target": target.pk,
            "csr": csr_pem(),
        },
    )


def _fill(world: World, who: str, case: Case) -> tuple[str, Any]:
    ids = dict(world.ids)
    user = world.users.get(who)
    # Each user revokes a token of their own.
    ids["token"] = apitokens.create_token(user, "old", actor="test")[0].pk if user else 0
    url = case.url.format(**ids)
    body = case.body
    if body and "{csr}" in str(body):
        body = {**body, "spec": {**body["spec"], "request": ids["csr"]}}
    return url, body


def _snapshot() -> dict[str, Any]:
    """What a refused request must leave unchanged."""
    return {
        "issuers": sorted(Issuer.objects.values_list("name", "generation")),
        "certs": sorted(
            Certificate.objects.values_list("name", "generation", "renew_requested_by")
        ),
        "requests": sorted(CertificateRequest.objects.values_list("name", "approval")),
        "clusters": sorted(
            Cluster.objects.values_list("name", "min_backoff_seconds", "checked_at")
        ),
        "channels": sorted(NotificationChannel.objects.values_list("name", "enabled")),
        "rules": NotificationRule.objects.count(),
        "webhooks": IssuanceWebhook.objects.count(),
        "endpoints": sorted(Endpoint.objects.values_list("host", "port", "next_probe_at")),
        "users": sorted(User.objects.values_list("username", "is_active")),
        "events": Event.objects.exclude(reason__in=["ApiTokenCreated"]).count(),
    }


@pytest.mark.parametrize(("rule", "case", "who"), _params(API, "api"))
def test_api(world: World, rule: Rule, case: Case, who: str) -> None:
    client = APIClient()
    if who != "anonymous":
        client.force_authenticate(user=world.users[who])
    url, body = _fill(world, who, case)
    before = _snapshot()
    response = getattr(client, case.method)(url, body, format="json")
    if allowed(rule, who):
        assert response.status_code in case.ok, response.content
        return
    if who == "anonymous":
        assert response.status_code == 401, response.content
    else:
        assert response.status_code == 403, response.content
        assert rule.needs in response.json()["detail"], response.json()
    assert _snapshot() == before


@pytest.mark.parametrize(("rule", "case", "who"), _params(CONSOLE, "console"))
def test_console(world: World, rule: Rule, case: Case, who: str) -> None:
    client = Client()
    if who != "anonymous":
        client.force_login(world.users[who])
    url, body = _fill(world, who, case)
    view = resolve(url.split("?")[0]).func
    declared = getattr(view, "permission_rules", ())
    post_rule = getattr(view, "permission_post_rule", None)
    # The view reads this rule of the table (for a POST, its `post` rule if it has one).
    if case.method == "post" and post_rule is not None:
        assert post_rule == rule, (url, post_rule)
        may = allowed(rule, who)
    else:
        assert declared and declared[0] == rule, (url, declared)
        may = any(allowed(r, who) for r in declared)
    before = _snapshot()
    response = getattr(client, case.method)(url, body or {})
    if may:
        assert response.status_code in case.ok, (response.status_code, response.content[:2000])
        assert not response.get("Location", "").startswith("/login/")
        return
    if who == "anonymous":
        assert response.status_code == 302
        assert response["Location"].startswith("/login/")
    else:
        assert response.status_code == 403, response.status_code
        assert rule.needs in response.content.decode(), response.content[:2000]
    assert _snapshot() == before


def test_every_rule_has_cases() -> None:
    """Each surface a rule says offers it has at least one case; no case for a rule that
    is not in the table."""
    for rule in RULES:
        key = (rule.resource, rule.action)
        if rule.api:
            assert API.get(key), f"no API case for {key}"
        if rule.console:
            assert CONSOLE.get(key), f"no console case for {key}"
    assert set(API) <= set(permissions.TABLE)
    assert set(CONSOLE) <= set(permissions.TABLE)


def _console_views() -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []

    def walk(patterns: list[URLPattern | URLResolver], prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif getattr(pattern.callback, "__module__", "").startswith("console.web"):
                found.append((prefix + str(pattern.pattern), pattern.callback))

    walk(get_resolver().url_patterns, "")
    return found


# Sign-in (a password and its second factor, or the OpenID Provider), sign-out and the API reference (which describes shapes, holds no data and is
# public like the schema it shows: console/web/api_docs.py) need no role.
PUBLIC = (
    "login/",
    "login/verify/",
    "login/sso/",
    "login/sso/callback/",
    "logout/",
    "api/docs/",
)


def test_every_console_page_reads_the_table() -> None:
    """Every console URL but the public ones names its rule(s) of the table."""
    views = _console_views()
    assert len(views) > 50
    missing = [
        route
        for route, view in views
        if route not in PUBLIC and not getattr(view, "permission_rules", ())
    ]
    assert missing == []


def test_every_api_operation_reads_the_table() -> None:
    """Every action of every API viewset maps to a rule of the table."""
    from issuance.api.permissions import table_action
    from issuance.api.urls import router

    unmapped = []
    for prefix, viewset, _ in router.registry:
        resource = getattr(viewset, "resource", None)
        for method, action in _actions(viewset):
            view = viewset()
            view.action = action
            name = table_action(view, method.upper())
            if resource is None or (resource, name) not in permissions.TABLE:
                unmapped.append(f"{prefix} {action} -> {resource}:{name}")
    assert unmapped == []


def _actions(viewset: Any) -> list[tuple[str, str]]:
    standard = {
        "list": "get",
        "retrieve": "get",
        "create": "post",
        "update": "put",
        "partial_update": "patch",
        "destroy": "delete",
    }
    found = [(method, name) for name, method in standard.items() if hasattr(viewset, name)]
    for extra in viewset.get_extra_actions():
        found += [(method, extra.__name__) for method in extra.mapping]
    return found


def test_the_schema_states_the_role_of_every_operation(client: Client) -> None:
    """The OpenAPI schema names each operation's rule, from the same table; only the
    sign-in endpoint and the bootstrap API (its own tokens) have none."""
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    without = []
    seen = set()
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            stated = operation.get("x-permission")
            if stated is None:
                without.append(path)
                continue
            rule = permissions.rule(stated["resource"], stated["action"])
            assert stated["roles"] == list(rule.roles)
            assert stated["reach"] == rule.reach
            assert operation["description"].endswith(f"**Permission:** {rule.describe()}")
            seen.add((rule.resource, rule.action))
    assert sorted(set(without)) == [
        "/api/v1/bootstrap/certificaterequests/",
        "/api/v1/bootstrap/certificaterequests/{name}/",
        "/api/v1/token/",
    ]
    # The API's index (/api/v1/) is left out of the schema by drf-spectacular.
    assert seen == {(r.resource, r.action) for r in RULES if r.api} - {("api-root", "read")}
    issuer_put = schema["paths"]["/api/v1/issuers/{name}/"]["put"]["x-permission"]
    assert issuer_put["roles"] == ["admin"]
