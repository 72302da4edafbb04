"""Which console roles, and which cluster/namespace scopes, a provider's groups give.

Rules come from two places, applied together at every sign-in through the provider:
OIDC_GROUP_ROLES (the environment, read-only in the console) and the rules an admin edits on
Users → Single sign-on (OidcGroupRule rows, audited). One rule: members of GROUP get ROLES,
everywhere or only in the clusters/namespaces listed:

    group=role[,role...][@cluster[/namespace][,cluster[/namespace]...]]

rules separated by ";" or new lines (the console's form takes one per line). Group names are
kept as the provider sends them, so they may hold "=" (an LDAP DN through Dex) and spaces:
the last "=" splits the group from the roles. The same as JSON, for names with ";" or "@":
`[{"group": "...", "roles": ["viewer"], "scopes": ["prod/team-a"]}]`.

How several matching rules combine (docs/sso.md): the roles add up; a user is limited to
clusters only when every role-giving rule they match is limited, and then to the union of
those scopes. An admin is never limited (scope.py: administration is console-wide), so a rule
giving admin cannot carry scopes. A limited rule whose clusters do not exist gives nothing:
a scoped user without RoleScope rows would otherwise see everything.

The parser imports no models: the settings call it at start-up so a bad OIDC_GROUP_ROLES
stops the start with a message naming the setting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from issuance.access.roles import ADMIN, ROLES

SETTING = "OIDC_GROUP_ROLES"
AUDIT_KIND = "SingleSignOn"
MAPPING_CHANGED = "GroupMappingChanged"

# Cluster and namespace names are DNS labels (RFC 1123), as on the Users page's scopes.
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_CLUSTER = _NAMESPACE


class MappingError(ValueError):
    """A rule that cannot be read; the message names where it came from."""


class AdminLimitedError(MappingError):
    """A rule giving admin with scopes (the API answers it 409, as for a user)."""


@dataclass(frozen=True)
class Rule:
    group: str
    roles: tuple[str, ...]
    # (cluster, namespace) pairs; namespace "" is the whole cluster. Empty: everywhere.
    scopes: tuple[tuple[str, str], ...] = ()

    def text(self) -> str:
        """The rule in the compact syntax (what the console's form shows)."""
        out = f"{self.group}={','.join(self.roles)}"
        if self.scopes:
            out += "@" + ",".join(f"{c}/{ns}" if ns else c for c, ns in self.scopes)
        return out


@dataclass(frozen=True)
class Grant:
    """What a user's groups give: roles, and the scopes they are limited to (none: everywhere)."""

    roles: frozenset[str]
    scopes: frozenset[tuple[str, str]] = field(default_factory=frozenset)
    # The groups that matched a rule, for the audit entry.
    matched: tuple[str, ...] = ()

    def describe(self) -> str:
        if not self.roles:
            return "no role"
        where = (
            ", limited to " + ", ".join(f"{c}/{ns}" if ns else c for c, ns in sorted(self.scopes))
            if self.scopes
            else ""
        )
        return f"roles {', '.join(sorted(self.roles))}{where}"


def _scope(entry: str, where: str) -> tuple[str, str]:
    cluster, slash, namespace = entry.strip().partition("/")
    if not _CLUSTER.match(cluster):
        raise MappingError(f"{where}: {entry!r}: {cluster!r} is not a cluster name")
    if slash and not _NAMESPACE.match(namespace):
        raise MappingError(f"{where}: {entry!r}: {namespace!r} is not a Kubernetes namespace name")
    return cluster, namespace


def _rule(
    group: str, roles: Iterable[str], scopes: Iterable[str], where: str, *, strip: bool = True
) -> Rule:
    # Text rules are trimmed; the API's JSON strings are kept as sent.
    group = group.strip() if strip else group
    if not group:
        raise MappingError(f"{where}: the group name is empty")
    if len(group) > 500:
        raise MappingError(f"{where}: the group name is longer than 500 characters")
    chosen = sorted({r.strip() for r in roles if r.strip()})
    if not chosen:
        raise MappingError(f"{where}: no role for group {group!r} (one of {', '.join(ROLES)})")
    unknown = [r for r in chosen if r not in ROLES]
    if unknown:
        raise MappingError(
            f"{where}: unknown role {unknown[0]!r} for group {group!r} (one of {', '.join(ROLES)})"
        )
    pairs: list[tuple[str, str]] = []
    for entry in scopes:
        if entry.strip():
            pair = _scope(entry, where)
            if pair not in pairs:
                pairs.append(pair)
    if pairs and ADMIN in chosen:
        raise AdminLimitedError(
            f"{where}: group {group!r}: the admin role cannot be limited to clusters"
        )
    return Rule(group, tuple(chosen), tuple(pairs))


def _parse_json(text: str, source: str) -> list[Rule]:
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MappingError(f"{source}: not valid JSON ({exc})") from exc
    if not isinstance(data, list):
        raise MappingError(f'{source}: JSON must be a list of {{"group", "roles", "scopes"}}')
    rules = []
    for index, item in enumerate(data, 1):
        where = f"{source}, rule {index}"
        if not isinstance(item, dict) or not isinstance(item.get("group"), str):
            raise MappingError(f'{where}: expected an object with a "group" string')
        roles = item.get("roles", [])
        scopes = item.get("scopes", [])
        if isinstance(roles, str):
            roles = [roles]
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            raise MappingError(f'{where}: "roles" must be a list of role names')
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise MappingError(f'{where}: "scopes" must be a list of cluster[/namespace]')
        unexpected = sorted(set(item) - {"group", "roles", "scopes"})
        if unexpected:
            raise MappingError(f"{where}: unknown key {unexpected[0]!r}")
        rules.append(_rule(item["group"], roles, scopes, where))
    return rules


def parse_rules(text: str, source: str = SETTING) -> list[Rule]:
    """The rules in `text` (compact syntax or a JSON list); MappingError names `source` and
    the rule that is wrong ("OIDC_GROUP_ROLES, rule 2: unknown role 'admn' ...")."""
    text = text.strip()
    if not text:
        return []
    if text.startswith("["):
        return _parse_json(text, source)
    rules = []
    entries = [e for e in re.split(r"[;\n]", text) if e.strip()]
    for index, entry in enumerate(entries, 1):
        where = f"{source}, rule {index} ({entry.strip()!r})"
        group, equals, rest = entry.rpartition("=")
        if not equals:
            raise MappingError(f"{where}: expected group=role[,role][@cluster[/namespace],...]")
        roles, _, scopes = rest.partition("@")
        rules.append(_rule(group, roles.split(","), scopes.split(","), where))
    return rules


def rules_from_shapes(items: Iterable[Mapping[str, Any]], source: str) -> list[Rule]:
    """Rules from the API's objects ({"group", "roles", "scopes"}), checked as the text is."""
    return [
        _rule(
            str(item.get("group", "")),
            list(item.get("roles", [])),
            list(item.get("scopes", [])),
            f"{source}, rule {index}",
            strip=False,
        )
        for index, item in enumerate(items, 1)
    ]


def rules_text(rules: Sequence[Rule]) -> str:
    """One rule per line, as the console's form shows and takes them."""
    return "\n".join(rule.text() for rule in rules)


# -- the rules in force -------------------------------------------------------------------


def environment_rules() -> list[Rule]:
    """OIDC_GROUP_ROLES, checked at start-up by the settings (so this cannot fail)."""
    from django.conf import settings

    return parse_rules(settings.OIDC_GROUP_ROLES)


def stored_rules() -> list[Rule]:
    from issuance.models import OidcGroupRule

    return [
        Rule(
            row.group,
            tuple(r for r in row.roles.split(",") if r),
            tuple(_scope(s, "stored rule") for s in row.scopes.split()),
        )
        for row in OidcGroupRule.objects.all()
    ]


def save_rules(rules: Sequence[Rule], *, actor: str) -> bool:
    """Replaces the console's rules (not the environment's); audited. Returns whether they
    changed. Clusters named in scopes must exist (MappingError naming the rule)."""
    from django.db import transaction

    from issuance.models import Cluster, OidcGroupRule
    from issuance.observability import events

    named = {c for rule in rules for c, _ in rule.scopes}
    known = set(Cluster.objects.filter(name__in=named).values_list("name", flat=True))
    for index, rule in enumerate(rules, 1):
        for cluster, _ in rule.scopes:
            if cluster not in known:
                raise MappingError(
                    f"rule {index} ({rule.text()!r}): there is no cluster named {cluster!r}"
                )
    with transaction.atomic():
        before = rules_text(stored_rules())
        after = rules_text(rules)
        if before == after:
            return False
        OidcGroupRule.objects.all().delete()
        OidcGroupRule.objects.bulk_create(
            OidcGroupRule(
                position=index,
                group=rule.group,
                roles=",".join(rule.roles),
                scopes=" ".join(f"{c}/{ns}" if ns else c for c, ns in rule.scopes),
            )
            for index, rule in enumerate(rules)
        )
        events.record(
            AUDIT_KIND,
            "group-mapping",
            MAPPING_CHANGED,
            f"Group rules set to: {'; '.join(r.text() for r in rules) or '(none)'} "
            f"(were: {before.replace(chr(10), '; ') or '(none)'}).",
            actor=actor[:150],
        )
    return True


def resolve(groups: Iterable[str], rules: Sequence[Rule] | None = None) -> Grant:
    """What these groups give under the rules in force (or `rules`); module docstring."""
    if rules is None:
        rules = [*environment_rules(), *stored_rules()]
    member = set(groups)
    matching = [rule for rule in rules if rule.group in member]
    if any(rule.scopes for rule in matching):
        matching = _with_known_clusters(matching)
    roles: set[str] = set()
    scopes: set[tuple[str, str]] = set()
    everywhere = False
    for rule in matching:
        roles.update(rule.roles)
        if rule.scopes:
            scopes.update(rule.scopes)
        else:
            everywhere = True
    if not roles:
        return Grant(frozenset())
    if everywhere or ADMIN in roles:
        scopes = set()
    return Grant(frozenset(roles), frozenset(scopes), tuple(sorted({r.group for r in matching})))


def _with_known_clusters(rules: list[Rule]) -> list[Rule]:
    """The rules with their unknown clusters dropped, and a limited rule left with no known
    cluster dropped whole (it must not become unlimited)."""
    from issuance.models import Cluster

    named = {c for rule in rules for c, _ in rule.scopes}
    known = set(Cluster.objects.filter(name__in=named).values_list("name", flat=True))
    kept = []
    for rule in rules:
        if not rule.scopes:
            kept.append(rule)
            continue
        pairs = tuple(p for p in rule.scopes if p[0] in known)
        if pairs:
            kept.append(Rule(rule.group, rule.roles, pairs))
    return kept
