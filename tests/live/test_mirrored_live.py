"""/ws/live/ for mirrored objects: scoped users connect and watch only their clusters and
namespaces; messages arrive after commit, in-memory and over Redis; a re-list is coalesced
into a few group_send calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from django.db import transaction

from console import live
from issuance.models import Cluster, ClusterResource, RoleScope
from tests.helpers import wait_for
from tests.live.conftest import communicator, run, session_cookie, subscribed
from tests.live.mirrored import (
    certificate_row,
    make_certificate_row,
    make_cluster,
    scoped_user,
)

pytestmark = pytest.mark.django_db(transaction=True)

REFUSED_FOR_TEAM_A = ["k8s", "k8s:prod", "k8s:prod/other", "k8s:staging/team-a", "dashboard"]


def _clusters() -> tuple[Cluster, Cluster]:
    prod, staging = make_cluster("prod"), make_cluster("staging")
    # Their creations' own messages leave through the background sender: let them go first.
    wait_for(lambda: live.sender.pending == 0, 5, "the sender's queue drained")
    return prod, staging


def _change(cluster: str, namespace: str, name: str, ready: str) -> None:
    with transaction.atomic():
        row = ClusterResource.objects.get(cluster__name=cluster, namespace=namespace, name=name)
        row.ready = ready
        row.save()


def _connect(user: User) -> tuple[bool, Any]:
    async def main() -> tuple[bool, Any]:
        cookie = await database_sync_to_async(session_cookie)(user)
        comm = communicator(cookie)
        result = await comm.connect(timeout=5)
        await comm.disconnect()
        return result

    result: tuple[bool, Any] = run(main())
    return result


def test_anonymous_is_refused() -> None:
    async def main() -> tuple[bool, Any]:
        comm = communicator(cookie=None)
        result = await comm.connect(timeout=5)
        await comm.disconnect()
        return result

    assert run(main()) == (False, 4401)


def test_who_may_connect(make_user: Callable[..., User]) -> None:
    prod, _ = _clusters()
    assert _connect(make_user("norole")) == (False, 4403)
    # A scoped viewer holds no console-wide role, and still connects.
    assert _connect(scoped_user(make_user, "team-a", "viewer", (prod, "team-a"))) == (True, None)
    # A scope without any role grants nothing.
    bare = make_user("scope-no-role")
    RoleScope.objects.create(user=bare, cluster=prod, namespace="team-a")
    assert _connect(bare) == (False, 4403)


def _scoped_viewer_watches_team_a(make_user: Callable[..., User]) -> None:
    prod, staging = _clusters()
    make_certificate_row(prod, "team-a", "web")
    make_certificate_row(prod, "other", "api")
    make_certificate_row(staging, "team-a", "web")
    wait_for(lambda: live.sender.pending == 0, 5, "the sender's queue drained")
    user = scoped_user(make_user, "team-a-viewer", "viewer", (prod, "team-a"))

    async def main() -> tuple[list[dict[str, Any]], dict[str, Any], bool, dict[str, Any]]:
        cookie = await database_sync_to_async(session_cookie)(user)
        comm = await subscribed(cookie, "k8s:prod/team-a")
        refusals = []
        for topic in REFUSED_FOR_TEAM_A:
            await comm.send_json_to({"subscribe": [topic]})
            refusals.append(await comm.receive_json_from(timeout=5))
        # A request mixing both: the refused topic named, the allowed one still subscribed.
        await comm.send_json_to({"subscribe": ["dashboard", "k8s:prod/team-a"]})
        mixed = await comm.receive_json_from(timeout=5)
        # Outside the scope: nothing arrives.
        await database_sync_to_async(_change)("prod", "other", "api", "False")
        await database_sync_to_async(_change)("staging", "team-a", "web", "False")
        silent = await comm.receive_nothing(timeout=0.5)
        await database_sync_to_async(_change)("prod", "team-a", "web", "False")
        got = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return refusals, mixed, silent, got

    refusals, mixed, silent, got = run(main())
    assert [r["type"] for r in refusals] == ["error"] * len(REFUSED_FOR_TEAM_A)
    assert [r["topic"] for r in refusals] == REFUSED_FOR_TEAM_A
    assert all(f"{r['topic']} is not yours" in r["error"] for r in refusals)
    assert mixed == {
        "type": "error",
        "error": "subscribe: dashboard is not yours to watch",
        "topic": "dashboard",
    }
    assert silent, "a change outside the user's scope was pushed"
    assert (got["group"], got["type"], got["cluster"], got["namespace"]) == (
        "k8s:prod/team-a",
        "mirror.changed",
        "prod",
        "team-a",
    )
    assert (got["name"], got["ready"]) == ("web", "False")


def test_scoped_viewer_watches_only_their_namespace(make_user: Callable[..., User]) -> None:
    _scoped_viewer_watches_team_a(make_user)


@pytest.mark.redis
def test_scoped_viewer_over_redis(redis_layer: str, make_user: Callable[..., User]) -> None:
    _scoped_viewer_watches_team_a(make_user)


def test_whole_cluster_scope(make_user: Callable[..., User]) -> None:
    prod, _ = _clusters()
    user = scoped_user(make_user, "prod-viewer", "viewer", (prod, ""))

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        cookie = await database_sync_to_async(session_cookie)(user)
        comm = await subscribed(cookie, "k8s:prod", "k8s:prod/any-namespace")
        await comm.send_json_to({"subscribe": ["k8s"]})
        refused = await comm.receive_json_from(timeout=5)
        await database_sync_to_async(make_certificate_row)(prod, "team-b", "db")
        got = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return refused, got

    refused, got = run(main())
    assert (refused["type"], refused["topic"]) == ("error", "k8s")
    assert (got["group"], got["namespace"], got["name"]) == ("k8s:prod", "team-b", "db")


def _unscoped_viewer_gets_every_topic(make_user: Callable[..., User]) -> None:
    prod, _ = _clusters()
    user = make_user("viewer-all", "viewer")
    topics = ["dashboard", "k8s", "k8s:prod", "k8s:prod/team-a", "k8s:staging/team-a"]

    async def main() -> tuple[list[dict[str, Any]], bool]:
        cookie = await database_sync_to_async(session_cookie)(user)
        comm = await subscribed(cookie, *topics)
        await database_sync_to_async(make_certificate_row)(prod, "team-a", "web")
        got = [await comm.receive_json_from(timeout=5) for _ in range(3)]
        once = await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()
        return got, once

    got, once = run(main())
    assert sorted(m["group"] for m in got) == ["k8s", "k8s:prod", "k8s:prod/team-a"]
    assert {(m["type"], m["name"]) for m in got} == {("mirror.changed", "web")}
    assert once, "more than one message per topic for one save"


def test_unscoped_viewer_may_subscribe_to_all(make_user: Callable[..., User]) -> None:
    _unscoped_viewer_gets_every_topic(make_user)


@pytest.mark.redis
def test_unscoped_viewer_over_redis(redis_layer: str, make_user: Callable[..., User]) -> None:
    _unscoped_viewer_gets_every_topic(make_user)


def test_invalid_cluster_topics_are_errors(make_user: Callable[..., User]) -> None:
    user = make_user("viewer-bad", "viewer")

    async def main() -> list[dict[str, Any]]:
        cookie = await database_sync_to_async(session_cookie)(user)
        comm = await subscribed(cookie, "dashboard")
        replies = []
        for topic in ("k8s:", "k8s:prod/", "k8s:prod/Team_A", "k8s:a.b", "k8s:prod/a/b"):
            await comm.send_json_to({"subscribe": [topic]})
            replies.append(await comm.receive_json_from(timeout=5))
        await comm.disconnect()
        return replies

    assert [r["type"] for r in run(main())] == ["error"] * 5


@pytest.mark.redis
def test_relist_of_1000_objects_costs_a_few_group_sends(
    redis_layer: str, make_user: Callable[..., User]
) -> None:
    """The number docs/clusters/live-and-metrics.md quotes: group_send calls for a 1000-object
    re-list."""
    prod, _ = _clusters()
    rows = ClusterResource.objects.bulk_create(
        certificate_row(prod, f"ns-{i % 10}", f"c{i}") for i in range(1000)
    )
    user = make_user("viewer-relist", "viewer")

    def relist() -> None:
        with transaction.atomic():
            for row in rows:
                row.resource_version = "2"
                row.save()

    async def main() -> tuple[int, list[dict[str, Any]], bool]:
        cookie = await database_sync_to_async(session_cookie)(user)
        comm = await subscribed(cookie, "k8s", "k8s:prod/ns-3")
        before = live.sender.sent
        await database_sync_to_async(relist)()
        got: list[dict[str, Any]] = []
        while len(got) < 2:
            # Only the groups' messages: a periodic one (live status) may come between them.
            message = await comm.receive_json_from(timeout=10)
            if "group" in message:
                got.append(message)
        await database_sync_to_async(wait_for)(
            lambda: live.sender.pending == 0, 10, "the sender's queue drained"
        )
        sends = live.sender.sent - before
        quiet = await comm.receive_nothing(timeout=0.5)
        await comm.disconnect()
        return sends, got, quiet

    sends, got, quiet = run(main())
    # "k8s", "k8s:prod" and one per namespace (10), not 3000.
    assert sends == 12
    by_group = {m["group"]: m for m in got}
    assert by_group["k8s"]["type"] == "mirror.many"
    assert by_group["k8s"]["changed"] == 1000
    assert by_group["k8s:prod/ns-3"]["changed"] == 100
    assert quiet


def test_cluster_topics_map_to_their_own_groups() -> None:
    assert live.group_for("k8s") == "live.k8s"
    assert live.group_for("k8s:prod") == "live.k8s.prod"
    assert live.group_for("k8s:prod/team-a") == "live.k8s.prod.team-a"
    # A cluster name has no dots, so "k8s:prod/team-a" and a cluster "prod.team-a" can't meet.
    assert live.group_for("k8s:prod.team-a") is None
    longest = "k8s:" + "c" * 63 + "/" + "n" * 63
    group = live.group_for(longest)
    assert group is not None and group.startswith("live.k8sh.") and len(group) < 100
    assert group != live.group_for("k8s:" + "c" * 63 + "/" + "n" * 62)
    for bad in (
        "k8s:",
        "k8s:/ns",
        "k8s:prod/",
        "k8s:prod/UPPER",
        "k8s:prod/a/b",
        "k8s:" + "c" * 64,
    ):
        assert live.group_for(bad) is None, bad
