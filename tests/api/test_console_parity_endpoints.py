"""The API counterparts of console actions that had none (tests/api/test_console_api_parity.py
maps them): a user's own API tokens, users (admin), and an issuer's "Test DNS"."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.access.apitokens import create_token
from issuance.models import ApiToken, Cluster, Event, Issuer, RoleScope, TOTPFactor
from tests.factories import make_acme_issuer

pytestmark = pytest.mark.django_db
Clients = Callable[[User | None], APIClient]


def test_own_tokens_listed_created_and_revoked(
    role_users: dict[str, User], api_client_for: Clients
) -> None:
    """Any signed-in user, even without a role, as on /account/tokens/; never another's."""
    create_token(role_users["viewer"], "not-yours", actor="viewer")
    client = api_client_for(role_users["nobody"])
    created = client.post("/api/v1/tokens/", {"name": "laptop"}, format="json")
    assert created.status_code == 201, created.content
    text = created.json()["token"]
    assert created.json()["prefix"] == text[:8]
    listing = client.get("/api/v1/tokens/").json()["results"]
    assert [t["name"] for t in listing] == ["laptop"]
    assert "token" not in listing[0]
    by_token = APIClient()
    by_token.credentials(HTTP_AUTHORIZATION=f"Token {text}")
    assert by_token.get("/api/v1/tokens/").status_code == 200
    token_id = created.json()["id"]
    # Not the token the request is made with: the caller would lock itself out.
    assert by_token.post(f"/api/v1/tokens/{token_id}/revoke/").status_code == 409
    other = ApiToken.objects.get(name="not-yours")
    assert client.post(f"/api/v1/tokens/{other.pk}/revoke/").status_code == 404
    assert other.revoked_at is None
    revoked = client.post(f"/api/v1/tokens/{token_id}/revoke/")
    assert revoked.status_code == 200
    assert revoked.json()["revokedAt"] is not None
    assert by_token.get("/api/v1/tokens/").status_code == 401
    reasons = list(Event.objects.filter(name="nobody").values_list("reason", flat=True))
    assert sorted(reasons) == ["ApiTokenCreated", "ApiTokenRevoked"]
    bad = client.post("/api/v1/tokens/", {"name": " "}, format="json")
    assert bad.status_code == 400 and list(bad.json()) == ["name"]
    assert api_client_for(None).get("/api/v1/tokens/").status_code in (401, 403)


def test_users_are_admin_only_and_keep_an_admin(
    role_users: dict[str, User], api_client_for: Clients
) -> None:
    for role in ("viewer", "operator", "approver"):
        client = api_client_for(role_users[role])
        assert client.get("/api/v1/users/").status_code == 403
        assert client.post("/api/v1/users/", {"username": "x"}, format="json").status_code == 403
        assert (
            client.patch("/api/v1/users/viewer/", {"active": False}, format="json").status_code
            == 403
        )
    admin = api_client_for(role_users["admin"])
    created = admin.post(
        "/api/v1/users/", {"username": "carol", "roles": ["operator"]}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["roles"] == ["operator"]
    carol = User.objects.get(username="carol")
    assert carol.check_password(created.json()["password"])
    assert admin.get("/api/v1/users/carol/").json().get("password") is None
    assert admin.post("/api/v1/users/", {"username": "Carol"}, format="json").status_code == 409
    bad = admin.post(
        "/api/v1/users/", {"username": "carol smith", "roles": ["root"]}, format="json"
    )
    assert bad.status_code == 400 and sorted(bad.json()) == ["roles[0]", "username"]

    changed = admin.patch(
        "/api/v1/users/carol/", {"roles": ["viewer"], "active": False}, format="json"
    )
    assert changed.status_code == 200, changed.content
    assert (changed.json()["roles"], changed.json()["active"]) == (["viewer"], False)
    # Yourself: neither disabled nor demoted here (the page offers neither).
    me = admin.patch("/api/v1/users/admin/", {"active": False}, format="json")
    assert me.status_code == 409
    assert User.objects.get(username="admin").is_active
    listing = admin.get("/api/v1/users/").json()["results"]
    assert {u["username"] for u in listing} >= {"admin", "carol", "viewer"}


def test_users_show_their_second_factor_and_password_change_read_only(
    role_users: dict[str, User], api_client_for: Clients
) -> None:
    admin = api_client_for(role_users["admin"])
    created = admin.post("/api/v1/users/", {"username": "dora"}, format="json").json()
    # An admin made the user: they choose their own password first.
    assert (created["secondFactor"], created["mustChangePassword"]) == (None, True)
    TOTPFactor.objects.create(user=role_users["viewer"], name="app", confirmed=True)
    # A set-up not finished (no code confirmed yet) is no factor.
    TOTPFactor.objects.create(user=role_users["operator"], name="app", confirmed=False)
    listing = {u["username"]: u for u in admin.get("/api/v1/users/").json()["results"]}
    assert listing["viewer"]["secondFactor"] == "totp"
    assert listing["operator"]["secondFactor"] is None
    assert (listing["dora"]["mustChangePassword"], listing["viewer"]["mustChangePassword"]) == (
        True,
        False,
    )
    one = admin.get("/api/v1/users/viewer/").json()
    assert (one["secondFactor"], one["mustChangePassword"]) == ("totp", False)
    # Read-only: not accepted in a change (the body is checked strictly), nothing changes.
    refused = admin.patch("/api/v1/users/viewer/", {"secondFactor": None}, format="json")
    assert refused.status_code == 400
    assert TOTPFactor.objects.filter(user=role_users["viewer"], confirmed=True).exists()
    reset = admin.post("/api/v1/users/viewer/reset-second-factor/")
    assert reset.status_code == 200 and reset.json()["secondFactor"] is None
    fields = APIClient().get("/api/schema/?format=json").json()["components"]["schemas"]["User"]
    for name in ("secondFactor", "mustChangePassword"):
        assert fields["properties"][name]["readOnly"] is True, fields["properties"][name]
        assert name in fields["required"]


def test_user_scopes_name_existing_clusters_and_never_limit_an_admin(
    role_users: dict[str, User], api_client_for: Clients
) -> None:
    Cluster.objects.create(name="prod", created_by="admin", kubeconfig_ciphertext="x")
    admin = api_client_for(role_users["admin"])
    url = "/api/v1/users/operator/"
    unknown = admin.patch(url, {"scopes": ["prod/team-a", "staging"]}, format="json")
    assert unknown.status_code == 400 and list(unknown.json()) == ["scopes[1]"]
    assert not RoleScope.objects.exists()
    scoped = admin.patch(url, {"scopes": ["prod/team-a"]}, format="json")
    assert scoped.status_code == 200, scoped.content
    assert scoped.json()["scopes"] == ["prod/team-a"]
    # An admin is never limited: refused whole, the roles stay as they were too.
    refused = admin.patch(url, {"roles": ["admin"]}, format="json")
    assert refused.status_code == 409
    assert admin.get(url).json()["roles"] == ["operator"]
    both = admin.patch(url, {"roles": ["admin"], "scopes": []}, format="json")
    assert both.status_code == 200, both.content
    assert (both.json()["roles"], both.json()["scopes"]) == (["admin"], [])


@pytest.fixture
def dns_issuer() -> Issuer:
    # A webhook provider nobody listens on: the preflight runs for real and fails.
    dns01 = {"webhook": {"url": "http://127.0.0.1:9/hook"}}
    spec = {"acme": {"server": "https://ca.invalid/dir", "solvers": [{"dns01": dns01}]}}
    return Issuer.objects.create(name="dnsy", kind="acme", spec=spec, due_at=timezone.now())


def test_test_dns_runs_the_preflight_and_keeps_the_outcome(
    role_users: dict[str, User], api_client_for: Clients, dns_issuer: Issuer
) -> None:
    url = "/api/v1/issuers/dnsy/test-dns/"
    body = {"dnsName": "www.example.test"}
    for role in ("viewer", "approver", "nobody"):
        assert api_client_for(role_users[role]).post(url, body, format="json").status_code == 403
    dns_issuer.refresh_from_db()
    assert dns_issuer.get_condition("DNSPreflight") is None
    operator = api_client_for(role_users["operator"])
    answer = operator.post(url, body, format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["ok"] is False
    assert answer.json()["dnsName"] == "www.example.test"
    dns_issuer.refresh_from_db()
    condition: Any = dns_issuer.get_condition("DNSPreflight")
    assert condition is not None and condition["status"] == "False"
    for bad in ("not a name", "WWW.example.test", "10.0.0.1", ""):
        refused = operator.post(url, {"dnsName": bad}, format="json")
        assert refused.status_code == 400, bad
        assert list(refused.json()) == ["dnsName"]
    make_acme_issuer("plain")
    plain = operator.post("/api/v1/issuers/plain/test-dns/", body, format="json")
    assert plain.status_code == 409
    assert operator.post("/api/v1/issuers/nosuch/test-dns/", body, format="json").status_code == 404
