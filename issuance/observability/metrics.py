"""Prometheus metrics: read from the database at scrape time.

State lives in the database and several worker processes may share it, so almost every
metric is a gauge computed when Prometheus scrapes, from a few aggregate queries and one
`values_list` over the certificates. A counter kept in one process would miss what the
other processes did and start again from zero after every restart. The exception is
ACME_REQUESTS: HTTP calls leave no row, so the ACME client counts them in-process (the
process that serves /metrics is the one whose calls are counted: under `manage.py serve`,
web and worker share one process).

Names and labels follow cert-manager's where there is an equivalent
(certmanager_certificate_expiration_timestamp_seconds → issuance_certificate_...).

Mirrored cert-manager objects (issuance_cluster_*) are counted per cluster and namespace,
not per object: cert-manager in each cluster already exports a series per Certificate, and
a console mirroring many clusters would multiply them. Two queries, whatever the number
of clusters and objects.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Min, Q, Sum
from django.utils import timezone
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric

from issuance.models import (
    AcmeServer,
    Approval,
    Certificate,
    CertificateRequest,
    CertificateState,
    Challenge,
    Cluster,
    ClusterActionState,
    ClusterResource,
    ClusterState,
    Issuer,
    MirroredKind,
    Order,
    OrderState,
    RequestState,
)
from issuance.probing import deployment

# Everything /metrics shows, and nothing else (not the process-global default registry).
REGISTRY = CollectorRegistry()

ACME_REQUESTS = Counter(
    "issuance_acme_requests",
    "Requests to ACME servers by action (directory, new_nonce, new_account, new_order, "
    "get_order, get_authorization, answer_challenge, finalize, download_certificate, "
    "renewal_info, ...) and result (ok, bad_nonce, rate_limited, problem, server_error, "
    "network_error, timeout, error). Counted in this process.",
    ["action", "result"],
    registry=REGISTRY,
)

ACME_SERVER_REQUESTS = Counter(
    "issuance_acme_server_requests",
    "Requests sent to each ACME server (directory URL) by result (ok, timeout, "
    "network_error, ...): during an outage, what reached (or tried to reach) the CA. "
    "Counted in this process.",
    ["server", "result"],
    registry=REGISTRY,
)

_CONDITIONS = ("True", "False", "Unknown")
_CERT_LABELS = ["name", "issuer_name", "issuer_kind"]


def _condition_status(conditions: Any, type_: str) -> str:
    for cond in conditions or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            status = cond.get("status")
            return status if status in _CONDITIONS else "Unknown"
    return "Unknown"


class DatabaseCollector:
    """Gauges computed from the database on every scrape."""

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        yield from self._certificates()
        yield from self._counts()
        yield from self._scheduler()
        yield from self._deployments()
        yield from self._issuers()
        names: list[str] = []
        yield from _clusters(names)
        yield from _mirrored(names)
        duration = GaugeMetricFamily(
            "issuance_metrics_collect_duration_seconds",
            "How long reading the database for this scrape took.",
        )
        duration.add_metric([], time.perf_counter() - started)
        yield duration

    # -- per certificate (one query) ----------------------------------------------------
    def _certificates(self) -> Iterator[Metric]:
        expiry = GaugeMetricFamily(
            "issuance_certificate_expiration_timestamp_seconds",
            "When the current certificate expires (notAfter), as a Unix timestamp.",
            labels=_CERT_LABELS,
        )
        renewal = GaugeMetricFamily(
            "issuance_certificate_renewal_timestamp_seconds",
            "When the certificate will be renewed (renewalTime), as a Unix timestamp.",
            labels=_CERT_LABELS,
        )
        ready = GaugeMetricFamily(
            "issuance_certificate_ready_status",
            "The Ready condition of the certificate: 1 for its current status, else 0.",
            labels=[*_CERT_LABELS, "condition"],
        )
        retry = GaugeMetricFamily(
            "issuance_certificate_next_retry_timestamp_seconds",
            "When a certificate in backoff after failed issuance is tried again.",
            labels=_CERT_LABELS,
        )
        failures = GaugeMetricFamily(
            "issuance_certificate_failed_issuance_attempts",
            "Consecutive failed issuance attempts (reset by a success).",
            labels=_CERT_LABELS,
        )
        rows = Certificate.objects.values_list(
            "name",
            "issuer__name",
            "issuer__kind",
            "not_after",
            "renewal_time",
            "next_retry_time",
            "failed_issuance_attempts",
            "conditions",
        ).order_by()
        for name, issuer, kind, not_after, renewal_time, next_retry, failed, conds in rows.iterator(
            chunk_size=2000
        ):
            labels = [name, issuer, kind]
            if not_after:
                expiry.add_metric(labels, not_after.timestamp())
            if renewal_time:
                renewal.add_metric(labels, renewal_time.timestamp())
            if next_retry:
                retry.add_metric(labels, next_retry.timestamp())
            if failed:
                failures.add_metric(labels, failed)
            status = _condition_status(conds, "Ready")
            for condition in _CONDITIONS:
                ready.add_metric([*labels, condition], 1.0 if condition == status else 0.0)
        yield from (expiry, renewal, ready, retry, failures)

    # -- aggregate counts ---------------------------------------------------------------
    def _counts(self) -> Iterator[Metric]:
        now = timezone.now()
        by_state = GaugeMetricFamily(
            "issuance_certificates", "Certificates by state.", labels=["state"]
        )
        counts = dict(Certificate.objects.order_by().values_list("state").annotate(n=Count("id")))
        for state in CertificateState.values:
            by_state.add_metric([state], counts.get(state, 0))
        yield by_state

        # The deployment states (what the endpoints serve) in the same query.
        backoff = Certificate.objects.aggregate(
            in_backoff=Count("id", filter=Q(next_retry_time__gt=now)),
            failed_attempts=Sum("failed_issuance_attempts"),
            **deployment.certificate_count_aggregates(now),
        )
        in_backoff = GaugeMetricFamily(
            "issuance_certificates_in_backoff",
            "Certificates waiting for their nextRetryTime after failed issuance.",
        )
        in_backoff.add_metric([], backoff["in_backoff"] or 0)
        yield in_backoff
        failed = GaugeMetricFamily(
            "issuance_failed_issuance_attempts",
            "Sum of consecutive failed issuance attempts over all certificates.",
        )
        failed.add_metric([], backoff["failed_attempts"] or 0)
        yield failed
        certificates = GaugeMetricFamily(
            "issuance_certificate_deployments",
            "Certificates by deployment state (status.deployment.state: Stale, Mismatch, "
            "Unreachable, Deploying, Unchecked, Deployed; none for no endpoints).",
            labels=["state"],
        )
        for state, n in deployment.counts_of(backoff).items():
            certificates.add_metric([state or "none"], n)
        yield certificates

        requests = GaugeMetricFamily(
            "issuance_certificate_requests",
            "Stored CertificateRequests (issuance attempts) by approval and Ready reason; "
            "old ones are pruned by revisionHistoryLimit.",
            labels=["approval", "state"],
        )
        # One query with a filtered count per (approval, state): every combination is
        # reported, zeros included, so series do not appear and vanish.
        pairs = [(a, st) for a in Approval.values for st in RequestState.values]
        totals = CertificateRequest.objects.aggregate(
            **{f"{a}_{st}": Count("id", filter=Q(approval=a, state=st)) for a, st in pairs}
        )
        for a, st in pairs:
            requests.add_metric([a, st], totals[f"{a}_{st}"] or 0)
        yield requests

        orders = GaugeMetricFamily("issuance_orders", "ACME orders by state.", labels=["state"])
        order_totals = Order.objects.aggregate(
            **{st or "none": Count("id", filter=Q(state=st)) for st in OrderState.values}
        )
        for label, n in order_totals.items():
            orders.add_metric([label], n or 0)
        yield orders

    def _deployments(self) -> Iterator[Metric]:
        """What the endpoints' last probes found (docs/verifying-deployments.md): one aggregate
        query. The certificates' deployment states are counted in `_counts`."""
        now = timezone.now()
        endpoints = GaugeMetricFamily(
            "issuance_endpoints",
            "Endpoints by what their last probe found (Deployed: the current revision; "
            "Deploying or Stale: an older one, Stale an hour after the new one was issued; "
            "Mismatch: a certificate from elsewhere; Unreachable; Unchecked: not probed yet).",
            labels=["state"],
        )
        for state, n in deployment.endpoint_counts(now).items():
            endpoints.add_metric([state], n)
        yield endpoints

    def _scheduler(self) -> Iterator[Metric]:
        counts = Challenge.objects.aggregate(
            queued=Count("id", filter=Q(finished=False, processing=False)),
            processing=Count("id", filter=Q(processing=True)),
        )
        for key, help_text in (
            ("queued", "Challenges waiting for a scheduler slot."),
            ("processing", "Challenges being presented and checked (holding a slot)."),
        ):
            gauge = GaugeMetricFamily(f"issuance_scheduler_challenges_{key}", help_text)
            gauge.add_metric([], counts[key] or 0)
            yield gauge
        cap = GaugeMetricFamily(
            "issuance_scheduler_challenges_cap",
            "At most this many challenges are processed at once (MAX_CONCURRENT_CHALLENGES).",
        )
        cap.add_metric([], settings.MAX_CONCURRENT_CHALLENGES)
        yield cap

    def _issuers(self) -> Iterator[Metric]:
        ready = GaugeMetricFamily(
            "issuance_issuer_ready_status",
            "The Ready condition of the issuer: 1 for its current status, else 0.",
            labels=["name", "kind", "condition"],
        )
        for name, kind, conds in Issuer.objects.order_by().values_list(
            "name", "kind", "conditions"
        ):
            status = _condition_status(conds, "Ready")
            for condition in _CONDITIONS:
                ready.add_metric([name, kind, condition], 1.0 if condition == status else 0.0)
        yield ready
        paused = GaugeMetricFamily(
            "issuance_acme_server_paused_until_timestamp_seconds",
            "An ACME server paused after rate limiting or Retry-After: no request before then.",
            labels=["directory_url"],
        )
        now = timezone.now()
        for url, until in AcmeServer.objects.filter(paused_until__gt=now).values_list(
            "directory_url", "paused_until"
        ):
            if until:
                paused.add_metric([url], until.timestamp())
        yield paused
        yield from self._reachability()

    def _reachability(self) -> Iterator[Metric]:
        from issuance.acme import health  # its record imports this module

        since = GaugeMetricFamily(
            "issuance_acme_server_unreachable_since_timestamp_seconds",
            "An ACME server an issuer uses that does not answer (refused, reset, timed "
            "out), since when; absent while it answers.",
            labels=["directory_url"],
        )
        failed = GaugeMetricFamily(
            "issuance_acme_server_outage_failed_requests",
            "Requests that got no answer from the ACME server in its current outage, or in "
            "its last one once it answers again (from every worker).",
            labels=["directory_url"],
        )
        for outage in health.outages():
            since.add_metric([outage.directory_url], outage.since.timestamp())
        for url, count in AcmeServer.objects.filter(failed_requests__gt=0).values_list(
            "directory_url", "failed_requests"
        ):
            failed.add_metric([url], count)
        yield since
        yield failed


REGISTRY.register(DatabaseCollector())


# -- mirrored cert-manager objects (issuance/kubernetes/certmanager/) -------------------------------------


def _clusters(names: list[str]) -> Iterator[Metric]:
    """Each cluster's connection and the write-backs queued for it (one query). Appends the
    clusters' names to `names`."""
    state = GaugeMetricFamily(
        "issuance_cluster_state",
        "The cluster's connection state: 1 for its current state, else 0.",
        labels=["cluster", "state"],
    )
    up = GaugeMetricFamily(
        "issuance_cluster_up",
        "1 while the console is connected to the cluster and finds cert-manager, else 0.",
        labels=["cluster"],
    )
    last_sync = GaugeMetricFamily(
        "issuance_cluster_last_sync_timestamp_seconds",
        "When a list or watch event from the cluster was last applied, as a Unix timestamp.",
        labels=["cluster"],
    )
    checked = GaugeMetricFamily(
        "issuance_cluster_checked_timestamp_seconds",
        "When the cert-manager API versions and the console's permissions were last checked.",
        labels=["cluster"],
    )
    missing = GaugeMetricFamily(
        "issuance_cluster_missing_permissions",
        "Permissions the console lacks in the cluster (SelfSubjectAccessReview).",
        labels=["cluster"],
    )
    actions = GaugeMetricFamily(
        "issuance_cluster_actions",
        "Stored renew/approve/deny write-backs by state (Pending: not written yet).",
        labels=["cluster", "state"],
    )
    oldest = GaugeMetricFamily(
        "issuance_cluster_action_oldest_pending_timestamp_seconds",
        "When the oldest write-back still pending was asked for; absent when none is.",
        labels=["cluster"],
    )
    by_state = {
        st: Count("actions", filter=Q(actions__state=st)) for st in ClusterActionState.values
    }
    pending_since = Min("actions__created_at", filter=Q(actions__state="Pending"))
    rows = (
        Cluster.objects.order_by()
        .annotate(**{f"actions_{st}": n for st, n in by_state.items()}, pending_since=pending_since)
        .values(
            "name",
            "state",
            "last_sync",
            "checked_at",
            "missing_permissions",
            "pending_since",
            *(f"actions_{st}" for st in by_state),
        )
    )
    for row in rows:
        name = row["name"]
        names.append(name)
        for value in ClusterState.values:
            state.add_metric([name, value], 1.0 if row["state"] == value else 0.0)
        up.add_metric([name], 1.0 if row["state"] == ClusterState.CONNECTED else 0.0)
        if row["last_sync"]:
            last_sync.add_metric([name], row["last_sync"].timestamp())
        if row["checked_at"]:
            checked.add_metric([name], row["checked_at"].timestamp())
        missing.add_metric([name], len(row["missing_permissions"] or []))
        for st in by_state:
            actions.add_metric([name, st], row[f"actions_{st}"] or 0)
        if row["pending_since"]:
            oldest.add_metric([name], row["pending_since"].timestamp())
    yield from (state, up, last_sync, checked, missing, actions, oldest)


_READY = ("True", "False", "Unknown")


class _Namespace:
    """The mirrored Certificates of one cluster/namespace, summed over the query's rows."""

    def __init__(self) -> None:
        self.ready = dict.fromkeys(_READY, 0)
        self.failing = 0
        self.in_backoff = 0
        self.expired = 0
        self.earliest: datetime | None = None

    def add(self, row: dict[str, Any]) -> None:
        ready = row["ready"] if row["ready"] in _READY else "Unknown"
        self.ready[ready] += row["n"]
        self.failing += row["failing"]
        self.in_backoff += row["in_backoff"]
        self.expired += row["expired"]
        if row["earliest"] and (self.earliest is None or row["earliest"] < self.earliest):
            self.earliest = row["earliest"]


def _mirrored(cluster_names: list[str]) -> Iterator[Metric]:
    """Mirrored objects per cluster and kind, and Certificates per cluster and namespace
    (one grouped query: rows grow with namespaces, not with objects)."""
    now = timezone.now()
    rows = (
        ClusterResource.objects.order_by()
        .values("cluster__name", "namespace", "kind", "ready")
        .annotate(
            n=Count("id"),
            failing=Count("id", filter=Q(failed_attempts__gt=0)),
            in_backoff=Count("id", filter=Q(next_retry_at__gt=now)),
            expired=Count("id", filter=Q(not_after__lte=now)),
            earliest=Min("not_after"),
            pending=Count("id", filter=Q(state="")),
        )
    )
    per_kind = {(c, k): 0 for c in cluster_names for k in MirroredKind.values}
    certificates: dict[tuple[str, str], _Namespace] = {}
    pending: dict[tuple[str, str], int] = {}
    for row in rows:
        where = (row["cluster__name"], row["namespace"])
        per_kind[(where[0], row["kind"])] = per_kind.get((where[0], row["kind"]), 0) + row["n"]
        if row["kind"] == MirroredKind.CERTIFICATE:
            certificates.setdefault(where, _Namespace()).add(row)
        elif row["kind"] == MirroredKind.CERTIFICATE_REQUEST:
            pending[where] = pending.get(where, 0) + row["pending"]
    yield _per_kind(per_kind)
    yield from _certificate_families(certificates)
    approval = GaugeMetricFamily(
        "issuance_cluster_certificate_requests_pending_approval",
        "Mirrored CertificateRequests neither Approved nor Denied, per namespace.",
        labels=["cluster", "namespace"],
    )
    for (cluster, namespace), n in sorted(pending.items()):
        approval.add_metric([cluster, namespace], n)
    yield approval


def _per_kind(counts: dict[tuple[str, str], int]) -> Metric:
    family = GaugeMetricFamily(
        "issuance_cluster_resources",
        "Mirrored cert-manager objects by cluster and kind.",
        labels=["cluster", "kind"],
    )
    for (cluster, kind), n in sorted(counts.items()):
        family.add_metric([cluster, kind], n)
    return family


def _certificate_families(certificates: dict[tuple[str, str], _Namespace]) -> Iterator[Metric]:
    labels = ["cluster", "namespace"]
    by_ready = GaugeMetricFamily(
        "issuance_cluster_certificates",
        "Mirrored Certificates by the status of their Ready condition.",
        labels=[*labels, "ready"],
    )
    failing = GaugeMetricFamily(
        "issuance_cluster_certificates_failing",
        "Mirrored Certificates whose last issuance failed (failedIssuanceAttempts > 0).",
        labels=labels,
    )
    in_backoff = GaugeMetricFamily(
        "issuance_cluster_certificates_in_backoff",
        "Mirrored Certificates waiting for their computed next retry.",
        labels=labels,
    )
    expired = GaugeMetricFamily(
        "issuance_cluster_certificates_expired",
        "Mirrored Certificates whose notAfter has passed.",
        labels=labels,
    )
    earliest = GaugeMetricFamily(
        "issuance_cluster_certificate_expiration_earliest_timestamp_seconds",
        "The earliest notAfter of the namespace's mirrored Certificates, as a Unix timestamp "
        "(alert on it minus time()).",
        labels=labels,
    )
    for (cluster, namespace), ns in sorted(certificates.items()):
        where = [cluster, namespace]
        for ready, n in ns.ready.items():
            by_ready.add_metric([*where, ready], n)
        failing.add_metric(where, ns.failing)
        in_backoff.add_metric(where, ns.in_backoff)
        expired.add_metric(where, ns.expired)
        if ns.earliest is not None:
            earliest.add_metric(where, ns.earliest.timestamp())
    yield from (by_ready, failing, in_backoff, expired, earliest)
