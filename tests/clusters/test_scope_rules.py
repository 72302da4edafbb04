"""Scoped roles (issuance/access/scope.py, issuance/access/roles.py) and cert-manager's backoff
(issuance/kubernetes/certmanager/retry.py), without a cluster."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import strategies as st

from issuance.access import scope
from issuance.access.roles import granted_roles, roles_of
from issuance.kubernetes.certmanager import retry
from issuance.models import Cluster, ClusterResource, RoleScope

T0 = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


# -- cert-manager's backoff ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("attempts", "hours"),
    [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 32), (60, 32), (None, 1), (0, 0.5)],
)
def test_next_retry_doubles_from_one_hour_up_to_32(attempts: int | None, hours: float) -> None:
    assert retry.next_retry(T0, attempts) == T0 + timedelta(hours=hours)


def test_no_failure_means_no_retry_time() -> None:
    assert retry.next_retry(None, 3) is None


def test_an_operators_own_backoff_flags() -> None:
    # e.g. minimum 5 minutes, maximum 2 hours
    assert retry.next_retry(T0, 1, 300, 7200) == T0 + timedelta(minutes=5)
    assert retry.next_retry(T0, 4, 300, 7200) == T0 + timedelta(minutes=40)
    assert retry.next_retry(T0, 6, 300, 7200) == T0 + timedelta(hours=2)


@given(st.integers(min_value=1, max_value=10_000))
def test_backoff_never_exceeds_the_maximum_and_never_shrinks(attempts: int) -> None:
    here, after = retry.backoff(attempts), retry.backoff(attempts + 1)
    assert timedelta(hours=1) <= here <= after <= timedelta(hours=32)


# -- scopes -------------------------------------------------------------------------------


@pytest.fixture
def clusters(db: None) -> dict[str, Cluster]:
    out = {}
    for name in ("prod", "staging"):
        c = Cluster(name=name)
        c.kubeconfig = "apiVersion: v1"
        c.save()
        out[name] = c
    return out


def _scoped(
    make_user: Callable[..., User], name: str, role: str, *pairs: tuple[Cluster, str]
) -> User:
    user = make_user(name, role)
    for cluster, namespace in pairs:
        RoleScope.objects.create(user=user, cluster=cluster, namespace=namespace)
    return User.objects.get(pk=user.pk)  # fresh: nothing cached


@pytest.mark.django_db
def test_a_scoped_user_holds_no_console_wide_role(
    make_user: Callable[..., User], clusters: dict[str, Cluster]
) -> None:
    alice = _scoped(make_user, "alice", "operator", (clusters["prod"], "team-a"))
    assert granted_roles(alice) == {"viewer", "operator"}
    assert roles_of(alice) == frozenset()
    assert not scope.sees_own_resources(alice)
    assert scope.has_scoped_role(alice, "operator", "prod", "team-a")
    assert not scope.has_scoped_role(alice, "operator", "prod", "team-b")
    assert not scope.has_scoped_role(alice, "operator", "staging", "team-a")
    assert not scope.has_scoped_role(alice, "approver", "prod", "team-a")


@pytest.mark.django_db
def test_an_unscoped_user_costs_one_query_as_before(make_user: Callable[..., User]) -> None:
    bob = User.objects.get(pk=make_user("bob", "viewer").pk)
    with CaptureQueriesContext(connection) as queries:
        assert roles_of(bob) == {"viewer"}
        assert scope.scope_of(bob).everything
        assert scope.has_scoped_role(bob, "viewer", "any", "where")
    assert len(queries) == 1


@pytest.mark.django_db
def test_visible_filters_by_cluster_and_namespace(
    make_user: Callable[..., User], clusters: dict[str, Cluster]
) -> None:
    for cluster in clusters.values():
        for namespace in ("team-a", "team-b"):
            ClusterResource.objects.create(
                cluster=cluster,
                kind="Certificate",
                namespace=namespace,
                name="web",
                uid=f"{cluster.name}-{namespace}",
            )
    team_a = _scoped(make_user, "carol", "viewer", (clusters["prod"], "team-a"))
    whole = _scoped(make_user, "dave", "viewer", (clusters["staging"], ""))
    everyone = User.objects.get(pk=make_user("erin", "viewer").pk)

    def seen(user: User) -> set[str]:
        return set(scope.visible(ClusterResource.objects.all(), user).values_list("uid", flat=True))

    assert seen(team_a) == {"prod-team-a"}
    assert seen(whole) == {"staging-team-a", "staging-team-b"}
    assert len(seen(everyone)) == 4


@pytest.mark.django_db
def test_live_topics_follow_the_scope(
    make_user: Callable[..., User], clusters: dict[str, Cluster]
) -> None:
    team_a = _scoped(make_user, "frank", "viewer", (clusters["prod"], "team-a"))
    assert scope.may_subscribe(team_a, "k8s:prod/team-a")
    for refused in (
        "k8s",
        "k8s:prod",
        "k8s:prod/team-b",
        "k8s:staging/team-a",
        "dashboard",
        "certificate:web",
    ):
        assert not scope.may_subscribe(team_a, refused), refused
    assert scope.scope_of(team_a).topics() == ["k8s:prod/team-a"]
    assert scope.topics_for("prod", "team-a") == ["k8s", "k8s:prod", "k8s:prod/team-a"]
    everyone = User.objects.get(pk=make_user("gina", "viewer").pk)
    assert scope.may_subscribe(everyone, "k8s") and scope.may_subscribe(everyone, "dashboard")
