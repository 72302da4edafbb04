"""Clusters page: the clusters whose cert-manager objects the console mirrors.

Everyone with a role sees the clusters of their scope (state, last sync, the cert-manager API
versions found, missing permissions, last error). Admins add, edit and delete clusters; the
kubeconfig is validated (issuance.kubernetes.certmanager.kubeconfig.validate) before anything is stored,
stored encrypted, and never shown again. Operators ask for a re-check ("Check now").
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from django import forms
from django.contrib import messages
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web.access import (
    check_in_scope,
    mirror_live_groups,
    permission_required,
    render_page,
    role_flags,
)
from issuance.access import permissions
from issuance.access.scope import scope_of, visible
from issuance.kubernetes.certmanager import kubeconfig
from issuance.models import Cluster, ClusterResource, MirroredKind
from issuance.models.cluster import DEFAULT_MAX_BACKOFF_SECONDS, DEFAULT_MIN_BACKOFF_SECONDS
from issuance.observability import events
from issuance.worker.wakeup import woken

log = logging.getLogger("console.web.clusters")

MAX_KUBECONFIG_BYTES = 256 * 1024
# cert-manager's backoff flags are durations; a week is far beyond any sensible maximum.
MAX_BACKOFF_SECONDS = 7 * 24 * 3600
RBAC_FILE = "docs/rbac/issuance-console.yaml"
# The same file inside the package (console/rbac/ links to docs/rbac/; the wheel holds a
# copy), so an installed console serves it without the checkout.
RBAC_PACKAGED = Path(__file__).resolve().parents[1] / "rbac" / "issuance-console.yaml"
ISSUERS_LISTED = 100


# -- who sees which cluster ------------------------------------------------------------


def visible_clusters(user: Any) -> QuerySet[Cluster]:
    """Clusters with at least one scope of the user (all of them for unscoped users)."""
    scope = scope_of(user)
    clusters = Cluster.objects.defer("kubeconfig_ciphertext").order_by("name")
    if scope.everything:
        return clusters
    return clusters.filter(name__in=sorted({c for c, _ in scope.pairs}))


def _get_visible(user: Any, name: str) -> Cluster:
    cluster = visible_clusters(user).filter(name=name).first()
    if cluster is None:
        raise Http404("no such cluster")
    return cluster


# -- forms ------------------------------------------------------------------------------


class ClusterForm(forms.Form):
    """Add (kubeconfig required) or edit (kubeconfig optional: replaces the stored one)."""

    name = forms.SlugField(max_length=63)
    kubeconfig = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "autocomplete": "off"}),
    )
    kubeconfig_file = forms.FileField(required=False)
    context = forms.CharField(max_length=253, required=False)
    min_backoff_seconds = forms.IntegerField(
        min_value=1, max_value=MAX_BACKOFF_SECONDS, initial=DEFAULT_MIN_BACKOFF_SECONDS
    )
    max_backoff_seconds = forms.IntegerField(
        min_value=1, max_value=MAX_BACKOFF_SECONDS, initial=DEFAULT_MAX_BACKOFF_SECONDS
    )

    def __init__(self, *args: Any, instance: Cluster | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.instance = instance
        self.offered_contexts: list[str] = []
        if instance is not None:
            # The name is the cluster's label on every mirrored row and scope: fixed.
            self.fields["name"].disabled = True
            self.fields["name"].initial = instance.name

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"])
        if self.instance is None and Cluster.objects.filter(name=name).exists():
            raise forms.ValidationError(f"a cluster named {name!r} already exists")
        return name

    def _kubeconfig_text(self) -> str:
        upload = self.cleaned_data.get("kubeconfig_file")
        if upload is not None:
            if upload.size > MAX_KUBECONFIG_BYTES:
                self.add_error("kubeconfig", "the file is larger than 256 KiB")
                return ""
            try:
                return bytes(upload.read()).decode("utf-8")
            except UnicodeDecodeError:
                self.add_error("kubeconfig", "the file is not UTF-8 text")
                return ""
        text = str(self.cleaned_data.get("kubeconfig") or "")
        if len(text.encode()) > MAX_KUBECONFIG_BYTES:
            self.add_error("kubeconfig", "the kubeconfig is larger than 256 KiB")
            return ""
        return text

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        lo, hi = data.get("min_backoff_seconds"), data.get("max_backoff_seconds")
        if lo is not None and hi is not None and lo > hi:
            self.add_error("max_backoff_seconds", "must be at least the minimum backoff")
        text = self._kubeconfig_text()
        if self.has_error("kubeconfig"):
            return data
        if not text.strip():
            if self.instance is None:
                self.add_error("kubeconfig", "paste a kubeconfig or choose a file")
                return data
            if self.instance.in_cluster:
                # It speaks as the console's ServiceAccount: no kubeconfig to check against,
                # and no context to choose.
                if str(data.get("context") or "").strip():
                    self.add_error("context", "an in-cluster cluster has no kubeconfig context")
                data["kubeconfig_text"], data["context"] = "", ""
                self.offered_contexts = []
                return data
            text = ""  # keep the stored one; the context is checked against it
        data["kubeconfig_text"] = text
        checked = text if text or self.instance is None else self.instance.kubeconfig
        self._validate(checked, data)
        return data

    def _validate(self, text: str, data: dict[str, Any]) -> None:
        context = str(data.get("context") or "").strip()
        data["context"] = context
        try:
            self.offered_contexts = kubeconfig.contexts(text)
        except kubeconfig.KubeconfigError:
            self.offered_contexts = []
        try:
            kubeconfig.validate(text, context)
        except kubeconfig.KubeconfigError as exc:
            field = exc.field if exc.field in ("kubeconfig", "context") else "kubeconfig"
            self.add_error(field, exc.message)


# -- pages ------------------------------------------------------------------------------


def _list_context(request: HttpRequest) -> dict[str, Any]:
    clusters = list(visible_clusters(request.user))
    return {
        **role_flags(request),
        "clusters": clusters,
        "rbac_file": RBAC_FILE,
        "operable": {c.name for c in clusters if _operates_in(request.user, c.name)},
    }


def _operates_in(user: Any, cluster: str) -> bool:
    """A re-check needs the operator role for the whole cluster, as in the API (the stricter
    of the two rules they had: the console let an operator of one namespace ask)."""
    return permissions.may_in(user, "cluster", "check", cluster, "")


@permission_required("cluster", "read")
def cluster_list(request: HttpRequest) -> HttpResponse:
    return render_page(
        request,
        "console/clusters/list.html",
        _list_context(request),
        live_groups=mirror_live_groups(request),
    )


@permission_required("cluster", "read")
def cluster_rbac(request: HttpRequest) -> HttpResponse:
    """The RBAC file the pages name, served as text so its link opens it in the browser (the
    manifest holds no secret: who may see the clusters pages may read it)."""
    text = RBAC_PACKAGED.read_text(encoding="utf-8")
    response = HttpResponse(text, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = 'inline; filename="issuance-console.yaml"'
    return response


@permission_required("cluster", "read")
def cluster_list_partial(request: HttpRequest) -> HttpResponse:
    return render(request, "console/partials/cluster_table.html", _list_context(request))


@permission_required("cluster", "read")
def cluster_detail(request: HttpRequest, cluster: str) -> HttpResponse:
    found = _get_visible(request.user, cluster)
    context = {**_list_context(request), "cluster": found, **_kind_counts(request, found)}
    return render_page(
        request,
        "console/clusters/detail.html",
        context,
        live_groups=mirror_live_groups(request),
    )


@permission_required("cluster", "read")
def cluster_detail_partial(request: HttpRequest, cluster: str) -> HttpResponse:
    found = _get_visible(request.user, cluster)
    context = {**_list_context(request), "cluster": found, **_kind_counts(request, found)}
    return render(request, "console/partials/cluster_detail.html", context)


def _kind_counts(request: HttpRequest, cluster: Cluster) -> dict[str, Any]:
    """Mirrored objects of each kind and namespace in the cluster, within the user's scope."""
    rows = (
        visible(ClusterResource.objects.filter(cluster=cluster), request.user)
        .order_by()
        .values_list("namespace", "kind")
        .annotate(n=Count("id"))
    )
    namespaces: dict[str, dict[str, int]] = {}
    for namespace, kind, n in rows:
        namespaces.setdefault(namespace, {})[kind] = n
    issuers = (
        visible(
            ClusterResource.objects.filter(
                cluster=cluster, kind__in=(MirroredKind.ISSUER, MirroredKind.CLUSTER_ISSUER)
            ),
            request.user,
        )
        .defer("body")
        .order_by("kind", "namespace", "name")[:ISSUERS_LISTED]
    )
    return {"namespaces": sorted(namespaces.items()), "issuers": list(issuers)}


def _form_context(form: ClusterForm, cluster: Cluster | None) -> dict[str, Any]:
    return {"form": form, "cluster": cluster, "rbac_file": RBAC_FILE}


def _recompute_retries(cluster: Cluster) -> bool:
    """After a backoff change the mirrored next-retry times are recomputed by the sync
    helper's mirror module; looked up at call time so this page works without it."""
    try:
        mirror = importlib.import_module("issuance.kubernetes.certmanager.mirror")
    except ImportError:
        log.warning(
            "issuance.kubernetes.certmanager.mirror is missing: next retries not recomputed"
        )
        return False
    recompute = getattr(mirror, "recompute_retries", None)
    if recompute is None:
        log.warning("mirror.recompute_retries is missing: next retries not recomputed")
        return False
    recompute(cluster)
    return True


@never_cache
@permission_required("cluster", "create")
def cluster_add(request: HttpRequest) -> HttpResponse:
    form = ClusterForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        cluster = Cluster(
            name=data["name"],
            context=data["context"],
            min_backoff_seconds=data["min_backoff_seconds"],
            max_backoff_seconds=data["max_backoff_seconds"],
            created_by=request.user.get_username(),
        )
        cluster.kubeconfig = data["kubeconfig_text"]
        with transaction.atomic():
            cluster.save()
            events.record(
                "Cluster",
                cluster.name,
                "Added",
                f"context {cluster.context or '(current-context)'}",
                actor=request.user.get_username(),
            )
            woken()  # the sync connects to the new cluster without waiting for its next round
        messages.success(request, f"Cluster {cluster.name} added; the sync connects to it next.")
        return redirect("web:cluster-detail", cluster=cluster.name)
    return render_page(request, "console/clusters/form.html", _form_context(form, None))


@never_cache
@permission_required("cluster", "change")
def cluster_edit(request: HttpRequest, cluster: str) -> HttpResponse:
    found = _get_visible(request.user, cluster)
    initial = {
        "name": found.name,
        "context": found.context,
        "min_backoff_seconds": found.min_backoff_seconds,
        "max_backoff_seconds": found.max_backoff_seconds,
    }
    form = ClusterForm(request.POST or None, request.FILES or None, instance=found, initial=initial)
    if request.method == "POST" and form.is_valid():
        changes, fields = _apply_edit(found, form.cleaned_data)
        with transaction.atomic():
            # Only what the form changed: the sync writes state, last_sync and its lease
            # on the same row meanwhile.
            found.save(update_fields=[*sorted(fields), "updated_at"])
            events.record(
                "Cluster",
                found.name,
                "Updated",
                ", ".join(changes) or "nothing changed",
                actor=request.user.get_username(),
            )
            if found.checked_at is None:
                woken()
        if "kubeconfig replaced" in changes or "context" in " ".join(changes):
            kubeconfig.forget(found.pk)
        backoff_changed = any(c.startswith(("min backoff", "max backoff")) for c in changes)
        if backoff_changed and not _recompute_retries(found):
            messages.warning(request, "Next retry times update with the next sync.")
        messages.success(request, f"Cluster {found.name} saved.")
        return redirect("web:cluster-detail", cluster=found.name)
    return render_page(request, "console/clusters/form.html", _form_context(form, found))


def _apply_edit(cluster: Cluster, data: dict[str, Any]) -> tuple[list[str], set[str]]:
    """Set the edited fields. Returns a short description of each change for the audit log
    (never the kubeconfig itself) and the columns changed."""
    changes: list[str] = []
    fields: set[str] = set()
    if data["kubeconfig_text"]:
        cluster.kubeconfig = data["kubeconfig_text"]
        # A new kubeconfig may reach another API server: look again at once.
        cluster.checked_at = None
        changes.append("kubeconfig replaced")
        fields |= {"kubeconfig_ciphertext", "in_cluster", "checked_at"}
    if data["context"] != cluster.context:
        changes.append(f"context {cluster.context or '-'} -> {data['context'] or '-'}")
        cluster.context = data["context"]
        cluster.checked_at = None
        fields |= {"context", "checked_at"}
    for field, label in (("min_backoff_seconds", "min"), ("max_backoff_seconds", "max")):
        if data[field] != getattr(cluster, field):
            changes.append(f"{label} backoff {getattr(cluster, field)}s -> {data[field]}s")
            setattr(cluster, field, data[field])
            fields.add(field)
    return changes, fields


@never_cache
@permission_required("cluster", "delete")
def cluster_delete(request: HttpRequest, cluster: str) -> HttpResponse:
    """GET: what goes with the cluster (its mirrored objects, events, scopes). POST: delete."""
    found = _get_visible(request.user, cluster)
    if request.method == "POST":
        name, pk = found.name, found.pk
        with transaction.atomic():
            # Row by row (not a bulk DELETE), so post_delete reaches the live updates.
            for resource in ClusterResource.objects.filter(cluster_id=pk).defer("body"):
                resource.delete()
            found.delete()
            events.record(
                "Cluster",
                name,
                "Deleted",
                "with its mirrored objects",
                actor=request.user.get_username(),
            )
        kubeconfig.forget(pk)
        messages.success(request, f"Cluster {name} deleted; nothing changed in the cluster.")
        return redirect("web:clusters")
    # Three counts, not one aggregate over three joins (that would multiply the rows).
    counts = {
        "resources": ClusterResource.objects.filter(cluster_id=found.pk).count(),
        "events": found.events.count(),
        "scopes": found.role_scopes.count(),
    }
    return render_page(request, "console/clusters/delete.html", {"cluster": found, **counts})


@require_POST
@permission_required("cluster", "check")
def cluster_check(request: HttpRequest, cluster: str) -> HttpResponse:
    """Clear checked_at: the sync runs discovery and the access review again."""
    found = _get_visible(request.user, cluster)
    check_in_scope(request, "cluster", "check", found.name, "")
    with transaction.atomic():
        found.checked_at = None
        found.save(update_fields=["checked_at", "updated_at"])
        events.record(
            "Cluster", found.name, "CheckRequested", "", actor=request.user.get_username()
        )
        woken()  # after commit: the worker looks at once instead of at its next round
    messages.success(request, f"Cluster {found.name} will be checked again shortly.")
    if request.POST.get("next") == "list":
        return redirect("web:clusters")
    return redirect("web:cluster-detail", cluster=found.name)


@require_POST
@permission_required("cluster", "create")
def kubeconfig_contexts(request: HttpRequest) -> JsonResponse:
    """The contexts a pasted kubeconfig offers (the add form fills its context list with
    them). Nothing is stored; the text is not echoed."""
    text = request.POST.get("kubeconfig", "")
    if len(text.encode()) > MAX_KUBECONFIG_BYTES:
        return JsonResponse({"error": "the kubeconfig is larger than 256 KiB"}, status=400)
    try:
        return JsonResponse({"contexts": kubeconfig.contexts(text)})
    except kubeconfig.KubeconfigError as exc:
        return JsonResponse({"error": exc.message, "field": exc.field}, status=400)
