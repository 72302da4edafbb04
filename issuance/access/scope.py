"""Scoped roles: a user's roles limited to clusters and namespaces (RoleScope rows).

Unscoped users (no RoleScope rows) see everything their roles allow. A scoped user sees and
acts on mirrored objects inside their scopes only, and on none of the console's own
resources (issuers, certificates, users, audit log …): pages, API and live updates alike.
An admin cannot be scoped (users.py refuses it): administration is console-wide.

Every page, API view and live subscription that shows mirrored objects goes through
`visible()` (querysets), `allows()` (one object) and `may_subscribe()` (live topics);
own-resource pages through `sees_own_resources()`. Out-of-scope objects answer 404, as
if they did not exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from django.db.models import Model, Q, QuerySet

from issuance.access.roles import granted_roles, is_scoped

M = TypeVar("M", bound=Model)

# Live topics for mirrored objects: every change is published to all three.
ALL_CLUSTERS_TOPIC = "k8s"  # unscoped users only


def cluster_topic(cluster: str) -> str:
    return f"k8s:{cluster}"


def namespace_topic(cluster: str, namespace: str) -> str:
    return f"k8s:{cluster}/{namespace}"


def topics_for(cluster: str, namespace: str) -> list[str]:
    """Where a change to an object in `cluster`/`namespace` is published."""
    topics = [ALL_CLUSTERS_TOPIC, cluster_topic(cluster)]
    if namespace:
        topics.append(namespace_topic(cluster, namespace))
    return topics


@dataclass(frozen=True)
class Scope:
    """`pairs` of (cluster name, namespace); namespace "" is the whole cluster."""

    everything: bool
    pairs: frozenset[tuple[str, str]] = frozenset()

    def allows(self, cluster: str, namespace: str) -> bool:
        if self.everything:
            return True
        return (cluster, "") in self.pairs or (cluster, namespace) in self.pairs

    def q(self, cluster_field: str = "cluster__name", namespace_field: str = "namespace") -> Q:
        """A filter for rows labelled with a cluster and a namespace (nothing when empty)."""
        if self.everything:
            return Q()
        q = Q(pk__in=[])
        for cluster, namespace in sorted(self.pairs):
            part = Q(**{cluster_field: cluster})
            if namespace:
                part &= Q(**{namespace_field: namespace})
            q |= part
        return q

    def topics(self) -> list[str]:
        """The live topics this scope may subscribe to for mirrored objects."""
        if self.everything:
            return [ALL_CLUSTERS_TOPIC]
        return sorted(namespace_topic(c, ns) if ns else cluster_topic(c) for c, ns in self.pairs)


EVERYTHING = Scope(everything=True)
NOTHING = Scope(everything=False)


def scope_of(user: Any) -> Scope:
    """The user's scope; cached on the user object for the request."""
    if user is None or not getattr(user, "is_authenticated", False):
        return NOTHING
    cached = getattr(user, "_issuance_scope", None)
    if isinstance(cached, Scope):
        return cached
    from issuance.models import RoleScope  # models import nothing from here

    if not is_scoped(user):
        result = EVERYTHING
    else:
        pairs = frozenset(
            (str(c), str(ns))
            for c, ns in RoleScope.objects.filter(user_id=user.pk).values_list(
                "cluster__name", "namespace"
            )
        )
        result = Scope(everything=False, pairs=pairs)
    user._issuance_scope = result
    return result


def sees_own_resources(user: Any) -> bool:
    """Whether the console's own resources (not mirrored ones) are visible to the user."""
    return scope_of(user).everything


def visible(queryset: QuerySet[M], user: Any, cluster_field: str = "cluster__name") -> QuerySet[M]:
    """The rows of a mirrored-object queryset inside the user's scope."""
    return queryset.filter(scope_of(user).q(cluster_field=cluster_field))


def allows(user: Any, cluster: str, namespace: str) -> bool:
    return scope_of(user).allows(cluster, namespace)


def has_scoped_role(user: Any, role: str, cluster: str, namespace: str) -> bool:
    """Whether `user` holds `role` for objects in `cluster`/`namespace` (the check every
    action on a mirrored object makes)."""
    return role in granted_roles(user) and allows(user, cluster, namespace)


def may_subscribe(user: Any, topic: str) -> bool:
    """Live topics: own-resource topics need an unscoped user; `k8s:…` topics the scope."""
    scope = scope_of(user)
    if scope.everything:
        return True
    if not topic.startswith("k8s:"):
        return False
    cluster, _, namespace = topic.removeprefix("k8s:").partition("/")
    if namespace:
        return scope.allows(cluster, namespace)
    return (cluster, "") in scope.pairs
