"""The Clusters page: list, add (validated, encrypted, never shown again), edit, delete,
Check now; roles, scopes, CSRF, escaping, audit log."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from issuance.models import Cluster, ClusterResource, Event, MirroredKind
from issuance.models.cluster import ClusterState
from tests.factories import scoped_user
from tests.web.mirror_builders import (
    TOKEN,
    child,
    failing_cert,
    kubeconfig_text,
    make_cluster,
    ready_cert,
)

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]
SCRIPT = "<script>alert(1)</script>"


def _form(**changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "name": "prod",
        "kubeconfig": kubeconfig_text("prod-admin", "staging"),
        "context": "prod-admin",
        "min_backoff_seconds": "3600",
        "max_backoff_seconds": "115200",
    }
    data.update(changes)
    return data


def test_admin_adds_a_cluster_stored_encrypted_and_never_shown(client_for: ClientFor) -> None:
    admin = client_for("admin")
    response = admin.post("/new-cluster/", _form())
    assert response.status_code == 302
    cluster = Cluster.objects.get(name="prod")
    assert cluster.context == "prod-admin"
    assert TOKEN in cluster.kubeconfig and TOKEN not in cluster.kubeconfig_ciphertext
    assert cluster.created_by == "admin"
    added = Event.objects.get(kind="Cluster", name="prod", reason="Added")
    assert added.actor == "admin" and TOKEN not in added.message
    for url in ("/clusters/", "/clusters/prod/", "/clusters/prod/edit/"):
        page = admin.get(url)
        assert page.status_code == 200 and TOKEN not in page.content.decode(), url


def test_kubeconfig_from_a_file(client_for: ClientFor) -> None:
    upload = SimpleUploadedFile("config", kubeconfig_text("ctx-a", current="ctx-a").encode())
    data = _form(kubeconfig="", context="", kubeconfig_file=upload)
    response = client_for("admin").post("/new-cluster/", data)
    assert response.status_code == 302
    assert TOKEN in Cluster.objects.get(name="prod").kubeconfig


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"kubeconfig": ""}, "kubeconfig", "paste a kubeconfig"),
        ({"kubeconfig": "not: [valid"}, "kubeconfig", "not valid YAML"),
        ({"kubeconfig": "a: 1\n"}, "kubeconfig", "not a kubeconfig"),
        ({"context": "nope"}, "context", "prod-admin, staging"),
        ({"name": "Not A Slug"}, "name", "letters"),
        ({"min_backoff_seconds": "0"}, "min_backoff_seconds", "greater than or equal"),
        (
            {"min_backoff_seconds": "7200", "max_backoff_seconds": "60"},
            "max_backoff_seconds",
            "at least the minimum",
        ),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(
    client_for: ClientFor, changes: dict[str, object], field: str, words: str
) -> None:
    response = client_for("admin").post("/new-cluster/", _form(**changes))
    assert response.status_code == 200
    errors = response.context["form"].errors
    assert field in errors and words in " ".join(errors[field]), errors
    html = response.content.decode()
    assert 'aria-invalid="true"' in html
    assert TOKEN not in html  # the pasted kubeconfig is not echoed back
    assert not Cluster.objects.exists()
    assert not Event.objects.filter(kind="Cluster").exists()


def test_duplicate_name_is_refused(client_for: ClientFor) -> None:
    make_cluster("prod")
    response = client_for("admin").post("/new-cluster/", _form())
    assert "already exists" in " ".join(response.context["form"].errors["name"])
    assert Cluster.objects.count() == 1


def test_contexts_are_offered_from_the_kubeconfig(client_for: ClientFor) -> None:
    answer = client_for("admin").post(
        "/new-cluster/contexts/", {"kubeconfig": kubeconfig_text("a", "b")}
    )
    assert answer.json() == {"contexts": ["a", "b"]}
    bad = client_for("admin").post("/new-cluster/contexts/", {"kubeconfig": "x: ["})
    assert bad.status_code == 400 and bad.json()["field"] == "kubeconfig"
    assert (
        client_for("operator").post("/new-cluster/contexts/", {"kubeconfig": "x"}).status_code
        == 403
    )


def test_forms_need_the_csrf_token(role_users: dict[str, User]) -> None:
    make_cluster("prod")
    client = Client(enforce_csrf_checks=True)
    client.force_login(role_users["admin"])
    assert client.post("/new-cluster/", _form(name="other")).status_code == 403
    assert client.post("/clusters/prod/delete/").status_code == 403
    assert client.post("/clusters/prod/check/").status_code == 403
    assert list(Cluster.objects.values_list("name", flat=True)) == ["prod"]
    page = client.get("/new-cluster/").content.decode()
    assert 'name="csrfmiddlewaretoken"' in page


def test_list_shows_state_sync_apis_missing_permissions_and_escaped_error(
    client_for: ClientFor,
) -> None:
    make_cluster(
        "prod",
        state=ClusterState.CONNECTED,
        last_sync=timezone.now(),
        checked_at=timezone.now(),
        api_versions=["cert-manager.io/v1", "acme.cert-manager.io/v1"],
        missing_permissions=["approve signers.cert-manager.io"],
        last_error=f"certificate signed by unknown authority {SCRIPT}",
    )
    html = client_for("viewer").get("/clusters/").content.decode()
    assert 'data-cluster="prod" data-state="Connected"' in html
    assert "acme.cert-manager.io/v1" in html
    assert "approve signers.cert-manager.io" in html
    assert "docs/rbac/issuance-console.yaml" in html
    assert SCRIPT not in html and "&lt;script&gt;" in html
    assert "Add cluster" not in html and "Check now" not in html  # a viewer: no buttons
    operator = client_for("operator").get("/clusters/").content.decode()
    assert "Check now" in operator and "/clusters/prod/edit/" not in operator
    admin = client_for("admin").get("/clusters/").content.decode()
    assert "/clusters/prod/edit/" in admin and "/new-cluster/" in admin


def test_edit_changes_backoff_and_replaces_kubeconfig(client_for: ClientFor) -> None:
    cluster = make_cluster("prod", checked_at=timezone.now())
    old_cipher = cluster.kubeconfig_ciphertext
    admin = client_for("admin")
    # Context and backoff only: the stored kubeconfig stays.
    response = admin.post(
        "/clusters/prod/edit/",
        _form(kubeconfig="", context="", min_backoff_seconds="60", max_backoff_seconds="600"),
    )
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert (cluster.min_backoff_seconds, cluster.max_backoff_seconds) == (60, 600)
    assert cluster.kubeconfig_ciphertext == old_cipher
    updated = Event.objects.get(kind="Cluster", name="prod", reason="Updated")
    assert "min backoff 3600s -> 60s" in updated.message and updated.actor == "admin"
    # A new kubeconfig replaces the stored one and asks for a re-check.
    new = kubeconfig_text("other", token="another-token-99")
    admin.post("/clusters/prod/edit/", _form(kubeconfig=new, context="other"))
    cluster.refresh_from_db()
    assert "another-token-99" in cluster.kubeconfig and cluster.context == "other"
    assert cluster.checked_at is None
    # A context the stored kubeconfig lacks: refused, nothing changed.
    response = admin.post("/clusters/prod/edit/", _form(kubeconfig="", context="missing"))
    assert "context" in response.context["form"].errors
    cluster.refresh_from_db()
    assert cluster.context == "other"


def test_delete_says_what_goes_and_deletes_the_mirror(client_for: ClientFor) -> None:
    cluster = make_cluster("prod")
    for i in range(3):
        ready_cert(cluster, "team-a", f"web-{i}")
    admin = client_for("admin")
    confirm = admin.get("/clusters/prod/delete/").content.decode()
    assert "3 mirrored objects" in confirm
    assert admin.post("/clusters/prod/delete/").status_code == 302
    assert not Cluster.objects.exists()
    assert not ClusterResource.objects.exists()
    assert Event.objects.filter(
        kind="Cluster", name="prod", reason="Deleted", actor="admin"
    ).exists()


def test_check_now_clears_checked_at_for_operators_in_scope(
    client_for: ClientFor, make_user: Callable[..., object]
) -> None:
    prod = make_cluster("prod", checked_at=timezone.now())
    other = make_cluster("other", checked_at=timezone.now())
    assert client_for("viewer").post("/clusters/prod/check/").status_code == 403
    assert client_for("operator").post("/clusters/prod/check/").status_code == 302
    prod.refresh_from_db()
    assert prod.checked_at is None
    assert Event.objects.filter(kind="Cluster", reason="CheckRequested", actor="operator").exists()
    scoped = Client()
    scoped.force_login(scoped_user("team-op", "operator", (prod, "team-a")))
    assert scoped.post("/clusters/other/check/").status_code == 404
    # As in the API: a re-check needs the operator role for the whole cluster.
    refused = scoped.post("/clusters/prod/check/")
    assert refused.status_code == 403
    assert "operator role for all of cluster prod" in refused.content.decode()
    other.refresh_from_db()
    assert other.checked_at is not None


def test_scoped_viewer_sees_only_their_clusters(client_for: ClientFor) -> None:
    prod = make_cluster("prod")
    make_cluster("secret-cluster")
    ready_cert(prod, "team-a", "web")
    ready_cert(prod, "team-b", "hidden")
    client = Client()
    client.force_login(scoped_user("team-a-viewer", "viewer", (prod, "team-a")))
    html = client.get("/clusters/").content.decode()
    assert "prod" in html and "secret-cluster" not in html
    assert client.get("/clusters/secret-cluster/").status_code == 404
    detail = client.get("/clusters/prod/").content.decode()
    assert 'data-namespace="team-a"' in detail and 'data-namespace="team-b"' not in detail
    assert client.get("/new-cluster/").status_code == 403
    counts = ClusterResource.objects.filter(kind=MirroredKind.CERTIFICATE).count()
    assert counts == 2


def test_backoff_change_recomputes_next_retries(client_for: ClientFor) -> None:
    """With the sync helper's mirror.recompute_retries (after the merge) the mirrored next
    retries follow the new backoff at once; without it the page says the next sync will."""
    cluster = make_cluster("prod")
    cert = failing_cert(cluster, "team-a", "web", attempts=3)
    assert cert.last_failure_time is not None
    response = client_for("admin").post(
        "/clusters/prod/edit/",
        _form(kubeconfig="", context="", min_backoff_seconds="60", max_backoff_seconds="600"),
        follow=True,
    )
    cert.refresh_from_db()
    try:
        mirror = importlib.import_module("issuance.kubernetes.certmanager.mirror")
    except ImportError:
        mirror = None
    if mirror is not None and hasattr(mirror, "recompute_retries"):
        # 60 s × 2^(3−1) = 240 s, under the 600 s maximum.
        assert cert.next_retry_at == cert.last_failure_time + timedelta(seconds=240)
    else:
        assert "Next retry times update with the next sync." in response.content.decode()
        assert cert.next_retry_at == cert.last_failure_time + timedelta(hours=4)


def test_cluster_page_lists_issuers_within_the_scope(client_for: ClientFor) -> None:
    prod = make_cluster("prod")
    child(prod, MirroredKind.ISSUER, "team-a", "team-a-ca", "")
    child(prod, MirroredKind.ISSUER, "team-b", "team-b-ca", "")
    child(prod, MirroredKind.CLUSTER_ISSUER, "", "letsencrypt", "")
    html = client_for("viewer").get("/clusters/prod/").content.decode()
    assert 'href="/clusters/prod/team-a/issuers/team-a-ca/"' in html
    assert 'href="/clusters/prod/clusterissuers/letsencrypt/"' in html
    scoped = Client()
    scoped.force_login(scoped_user("team-a-viewer", "viewer", (prod, "team-a")))
    mine = scoped.get("/clusters/prod/").content.decode()
    assert "team-a-ca" in mine and "team-b-ca" not in mine and "letsencrypt" not in mine
    assert scoped.get("/clusters/prod/clusterissuers/letsencrypt/").status_code == 404
    whole = Client()
    whole.force_login(scoped_user("prod-viewer", "viewer", (prod, "")))
    assert whole.get("/clusters/prod/clusterissuers/letsencrypt/").status_code == 200


def test_an_in_cluster_cluster_is_edited_without_a_kubeconfig(client_for: ClientFor) -> None:
    cluster = Cluster.objects.create(name="local", in_cluster=True)
    admin = client_for("admin")
    form = {"name": "local", "kubeconfig": "", "context": ""}
    response = admin.post(
        "/clusters/local/edit/",
        {**form, "min_backoff_seconds": "60", "max_backoff_seconds": "600"},
    )
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert (cluster.min_backoff_seconds, cluster.max_backoff_seconds) == (60, 600)
    assert cluster.in_cluster and cluster.kubeconfig_ciphertext == ""
    response = admin.post(
        "/clusters/local/edit/",
        {**form, "context": "x", "min_backoff_seconds": "60", "max_backoff_seconds": "600"},
    )
    assert "no kubeconfig context" in str(response.context["form"].errors["context"])
    # A kubeconfig makes it a kubeconfig cluster.
    response = admin.post(
        "/clusters/local/edit/",
        _form(name="local", kubeconfig=kubeconfig_text("other"), context="other"),
    )
    assert response.status_code == 302
    cluster.refresh_from_db()
    assert not cluster.in_cluster and cluster.context == "other"
    assert TOKEN in cluster.kubeconfig
