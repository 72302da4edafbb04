"""The dashboard's mirrored section: per cluster, the Certificates cert-manager holds there.

Total, ready, failing (with the soonest computed next retry) and expiring within 30 days,
in one grouped query; then the failing ones with their next retry, in one more. Both
limited to the user's scope and filterable by cluster and namespace (?cluster=&namespace=).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.db.models import Count, F, Min, Q
from django.http import HttpRequest
from django.utils import timezone

from issuance.access.scope import scope_of, visible
from issuance.models import Cluster, ClusterResource, MirroredKind

EXPIRY_WINDOW = timedelta(days=30)
FAILING_LISTED = 10


def _filtered(request: HttpRequest) -> tuple[Any, str, str]:
    cluster = request.GET.get("cluster", "").strip()[:63]
    namespace = request.GET.get("namespace", "").strip()[:253]
    certs = visible(ClusterResource.objects.filter(kind=MirroredKind.CERTIFICATE), request.user)
    if cluster:
        certs = certs.filter(cluster__name=cluster)
    if namespace:
        certs = certs.filter(namespace=namespace)
    return certs, cluster, namespace


def clusters_context(request: HttpRequest) -> dict[str, Any]:
    now = timezone.now()
    certs, cluster, namespace = _filtered(request)
    failing = Q(ready="False") | Q(last_failure_time__isnull=False)
    per_cluster = list(
        certs.order_by()
        .values("cluster__name", "cluster__state")
        .annotate(
            total=Count("id"),
            ready_count=Count("id", filter=Q(ready="True")),
            failing_count=Count("id", filter=failing),
            expiring_count=Count("id", filter=Q(not_after__lte=now + EXPIRY_WINDOW)),
            next_retry=Min("next_retry_at", filter=Q(next_retry_at__gt=now)),
        )
        .order_by("cluster__name")
    )
    failing_rows = list(
        certs.filter(failing)
        .select_related("cluster")
        .defer("body", "cluster__kubeconfig_ciphertext")
        .order_by(F("next_retry_at").asc(nulls_last=True), "cluster__name", "namespace", "name")[
            :FAILING_LISTED
        ]
    )
    scope = scope_of(request.user)
    cluster_names = Cluster.objects.order_by("name").values_list("name", flat=True)
    if not scope.everything:
        cluster_names = cluster_names.filter(name__in=sorted({c for c, _ in scope.pairs}))
    return {
        "mirror_clusters": per_cluster,
        "mirror_failing": failing_rows,
        "mirror_filter_cluster": cluster,
        "mirror_filter_namespace": namespace,
        "mirror_cluster_names": list(cluster_names),
        "mirror_expiry_days": EXPIRY_WINDOW.days,
    }
