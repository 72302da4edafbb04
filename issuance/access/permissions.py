"""Who may do what: one table for the console's pages, the REST API, its OpenAPI schema, the
documentation (docs/hooks/permissions.py) and the permission-matrix tests.

Each rule names a resource, an action on it, the roles that may do it (any one of them,
with the expansion of issuance.access.roles: admin holds every role, operator and approver
hold viewer) and where the role must be held:

- `CONSOLE_WIDE`: the role held console-wide (`roles_of`); a user scoped to clusters or
  namespaces holds none, so every console-wide action refuses them (403);
- `IN_SCOPE`: the role granted to the user (`granted_roles`), scoped or not; the view then
  narrows what it shows to the user's scope and answers 404 for objects outside it, and an
  action on one mirrored object checks the role in that object's cluster/namespace.

An empty `roles` means any signed-in user (their own API tokens). The API maps a viewset's
DRF action to the table's action with `api_action()`; a console view declares its
(resource, action) with `console.web.access.permission_required`. A (resource, action)
missing from the table is refused for everyone (`rule()` raises KeyError at import time of
the view, so a typo fails at startup, not at the first request).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from issuance.access.roles import ADMIN, APPROVER, OPERATOR, VIEWER, granted_roles, roles_of
from issuance.access.scope import has_scoped_role

Reach = Literal["console-wide", "in-scope"]
CONSOLE_WIDE: Final[Reach] = "console-wide"
IN_SCOPE: Final[Reach] = "in-scope"


@dataclass(frozen=True)
class Rule:
    resource: str
    action: str
    roles: tuple[str, ...]  # any one of them; () = any signed-in user
    reach: Reach = CONSOLE_WIDE
    api: bool = True  # the REST API offers it
    console: bool = True  # the console offers it
    note: str = ""  # shown in the documentation's table

    @property
    def needs(self) -> str:
        """The roles in words, for refusals and the documentation: "the admin role"."""
        if not self.roles:
            return "a signed-in user"
        return "the " + " or ".join(self.roles) + " role"

    @property
    def where(self) -> str:
        """Where the role must be held, in words."""
        if not self.roles:
            return ""
        if self.reach == CONSOLE_WIDE:
            return "console-wide (not limited to clusters or namespaces)"
        return "in the user's clusters and namespaces (objects elsewhere answer 404)"

    def describe(self) -> str:
        """One sentence for the OpenAPI schema and the documentation."""
        return f"Needs {self.needs}" + (f", {self.where}" if self.where else "") + "."

    def refusal(self) -> str:
        """The body of a 403: names the role the action needs."""
        where = " (not limited to clusters or namespaces)" if self.reach == CONSOLE_WIDE else ""
        return f"This action needs {self.needs}{where}."

    def held_by(self, user: Any) -> bool:
        if user is None or not getattr(user, "is_authenticated", False):
            return False
        if not self.roles:
            return True
        held = roles_of(user) if self.reach == CONSOLE_WIDE else granted_roles(user)
        return any(role in held for role in self.roles)


def _rules(
    resource: str,
    actions: Mapping[str, tuple[str, ...]],
    reach: Reach = CONSOLE_WIDE,
    *,
    api_only: tuple[str, ...] = (),
    console_only: tuple[str, ...] = (),
    notes: Mapping[str, str] | None = None,
) -> list[Rule]:
    return [
        Rule(
            resource,
            action,
            roles,
            reach,
            api=action not in console_only,
            console=action not in api_only,
            note=(notes or {}).get(action, ""),
        )
        for action, roles in actions.items()
    ]


V, OP, AP, A = (VIEWER,), (OPERATOR,), (APPROVER,), (ADMIN,)

# The table. Changing issuers and approval policies is admin-only on both surfaces (issue
# 23: the API let operators do it while the console did not).
RULES: Final[tuple[Rule, ...]] = (
    *_rules(
        "issuer",
        {"read": V, "create": A, "change": A, "delete": A, "test-dns": OP},
        notes={"change": "includes the approval policy in the spec"},
    ),
    *_rules(
        "approval-policy",
        {"read": V, "change": A, "preview": (OPERATOR, APPROVER)},
        console_only=("read", "change", "preview"),
        notes={"change": "in the API: PUT/PATCH of the issuer's spec.approvalPolicy"},
    ),
    *_rules(
        "certificate",
        {
            "read": V,
            "create": OP,
            "change": OP,
            "delete": OP,
            "renew": OP,
            "revoke": OP,
            "bulk": OP,
            "read-key": A,
        },
        console_only=("bulk",),
        notes={"read-key": "the private key, alone or in PKCS#12; every read is in the audit log"},
    ),
    *_rules(
        "endpoint",
        {"read": V, "create": OP, "delete": OP, "check": OP},
        api_only=("read",),
        notes={
            "read": "a certificate's endpoints and what each served at its last probe (in the "
            "console: the certificate page's Endpoints card)",
            "check": "Check now: probe a certificate's endpoints at once",
        },
    ),
    *_rules(
        "download-token",
        {"read": OP, "create": OP, "revoke": OP},
    ),
    *_rules(
        "certificate-request",
        {"read": V, "create": OP, "change": OP, "delete": OP, "approve": AP, "deny": AP},
        api_only=("create", "change", "delete"),
        notes={"read": "the approval queue"},
    ),
    *_rules("order", {"read": V}),
    *_rules("challenge", {"read": V}),
    *_rules("dashboard", {"read": V}, notes={"read": "in the API: the scheduler and stats"}),
    *_rules("event", {"read": V}, notes={"read": "the audit log and its CSV export"}),
    *_rules(
        "notification-channel",
        {"read": V, "create": A, "change": A, "delete": A, "send-test": A},
    ),
    *_rules(
        "notification-rule",
        {"read": V, "create": A, "change": A, "delete": A},
        api_only=("read", "change"),
        notes={"read": "the console lists rules with the channels"},
    ),
    *_rules(
        "issuance-webhook",
        {"read": A, "create": A, "delete": A, "send-test": A},
    ),
    *_rules("webhook-delivery", {"read": A}, api_only=("read",)),
    *_rules(
        "user",
        {
            "read": A,
            "create": A,
            "change": A,
            "reset-password": A,
            "reset-second-factor": A,
        },
        notes={
            "change": "roles, scopes, disable and enable",
            "reset-password": "a new one-time password, shown once; changed at the next sign-in",
            "reset-second-factor": "a lost phone: set up anew at the next sign-in",
        },
    ),
    *_rules("signin-lock", {"read": A, "lift": A}),
    *_rules(
        "sso-group-rule",
        {"read": A, "change": A},
        notes={"read": "single sign-on's group rules", "change": "applied at each next sign-in"},
    ),
    *_rules(
        "account",
        {"read": (), "change": ()},
        console_only=("read", "change"),
        notes={
            "read": "one's own security page",
            "change": "one's own password, second factor and recovery codes",
        },
    ),
    *_rules(
        "api-token",
        {"read": (), "create": (), "revoke": ()},
        notes={"read": "each user's own tokens"},
    ),
    *_rules(
        "cluster",
        {"read": V, "check": OP},
        IN_SCOPE,
        notes={"read": "clusters of the user's scope", "check": "in the cluster's scope"},
    ),
    *_rules("cluster", {"create": A, "change": A, "delete": A}),
    *_rules(
        "mirrored-object",
        {"read": V, "renew": OP, "approve": AP, "deny": AP},
        IN_SCOPE,
        notes={
            "renew": "a mirrored Certificate, in its namespace",
            "approve": "a mirrored CertificateRequest, in its namespace",
            "deny": "a mirrored CertificateRequest, in its namespace",
        },
    ),
    *_rules("cluster-action", {"read": V}, IN_SCOPE, api_only=("read",)),
    *_rules("api-root", {"read": V}, api_only=("read",), notes={"read": "/api/v1/, its index"}),
)

TABLE: Final[Mapping[tuple[str, str], Rule]] = {(r.resource, r.action): r for r in RULES}
if len(TABLE) != len(RULES):  # pragma: no cover - a duplicate row is a typo
    raise RuntimeError("issuance.access.permissions: a (resource, action) appears twice")


def rule(resource: str, action: str) -> Rule:
    """The rule of one action; KeyError for an action the table does not have."""
    return TABLE[(resource, action)]


def may(user: Any, resource: str, action: str) -> bool:
    return rule(resource, action).held_by(user)


def may_in(user: Any, resource: str, action: str, cluster: str, namespace: str) -> bool:
    """An in-scope action on one object: the role held in the object's cluster/namespace
    (namespace "" = the whole cluster: a user scoped to some of its namespaces does not
    hold it)."""
    return any(
        has_scoped_role(user, role, cluster, namespace) for role in rule(resource, action).roles
    )


def refusal_in(resource: str, action: str, cluster: str, namespace: str) -> str:
    where = f"{cluster}/{namespace}" if namespace else f"all of cluster {cluster}"
    return f"This action needs {rule(resource, action).needs} for {where}."


# DRF's standard actions and the table's; a viewset's own actions (renew, approve …) keep
# their name, with "_" as "-" (send_test → send-test).
_API_ACTIONS: Final[Mapping[str, str]] = {
    "list": "read",
    "retrieve": "read",
    "create": "create",
    "update": "change",
    "partial_update": "change",
    "destroy": "delete",
}


def api_action(drf_action: str) -> str:
    return _API_ACTIONS.get(drf_action, drf_action.replace("_", "-"))
