"""Dashboard: counts, scheduler depth, challenges in flight, backoff, renewals.

The page is a set of sections; each is also served alone as a partial that live.js re-fetches
when a message for the dashboard arrives. Every section runs a small, fixed number of
queries, whatever the number of certificates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.web.access import mirror_live_groups, permission_required, render_page
from console.web.charts import charts
from console.web.mirrored_dashboard import clusters_context
from issuance.access.scope import sees_own_resources
from issuance.acme import health
from issuance.models import (
    FINAL_CHALLENGE_STATES,
    AcmeServer,
    Approval,
    Certificate,
    CertificateRequest,
    CertificateState,
    Challenge,
    ChallengeState,
    DeliveryState,
    Issuer,
    IssuerKind,
    Notification,
)
from issuance.observability.stats import stats
from issuance.probing.deployment import certificate_counts

LIST_LIMIT = 10
# How the challenges controller words a failing self check in `reason`.
SELF_CHECK_FAILED = "self check failed"
RENEWAL_WINDOW = timedelta(days=7)
NOTIFICATION_WINDOW = timedelta(days=1)


@dataclass(frozen=True)
class ChallengeStep:
    """Where a challenge is in its lifecycle (issuance/controllers/challenges.py), for people."""

    step: str
    detail: str = ""


def challenge_step(challenge: Challenge) -> ChallengeStep:
    if challenge.finished or challenge.state in FINAL_CHALLENGE_STATES:
        return ChallengeStep(challenge.state or "finished", challenge.reason)
    if not challenge.processing:
        return ChallengeStep("queued")
    if challenge.condition_is("Accepted") or challenge.state == ChallengeState.PROCESSING:
        # Self-check passed and the answer is sent (or being sent): the CA is validating.
        return ChallengeStep("accepted", challenge.reason)
    if not challenge.presented:
        # Scheduled; presenting may have failed (the reason says why) and will be retried.
        return ChallengeStep("scheduled", challenge.reason)
    if challenge.reason.startswith(SELF_CHECK_FAILED):
        return ChallengeStep("self-check failing", challenge.reason)
    return ChallengeStep("presented", challenge.reason)


def counts_context() -> dict[str, Any]:
    by_state = dict(
        Certificate.objects.order_by()
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )
    states = [(state.value, by_state.get(state.value, 0)) for state in CertificateState]
    return {
        "state_counts": states,
        "total_certificates": sum(by_state.values()),
        "pending_approvals": CertificateRequest.objects.filter(approval=Approval.PENDING).count(),
    }


def scheduler_context() -> dict[str, Any]:
    now = timezone.now()
    unfinished = Challenge.objects.filter(finished=False).order_by()
    return {
        "processing": unfinished.filter(processing=True).count(),
        "queued": unfinished.filter(processing=False).count(),
        "cap": settings.MAX_CONCURRENT_CHALLENGES,
        "paused_servers": list(
            AcmeServer.objects.filter(paused_until__gt=now).order_by("paused_until")[:LIST_LIMIT]
        ),
    }


def ca_context() -> dict[str, Any]:
    """ACME servers that do not answer: since when, the error, and which issuers use them."""
    outages = health.outages()
    issuers: dict[str, list[str]] = {}
    if outages:
        urls = {o.directory_url for o in outages}
        for name, spec in Issuer.objects.filter(kind=IssuerKind.ACME).values_list("name", "spec"):
            server = (spec.get("acme") or {}).get("server") if isinstance(spec, dict) else None
            if server in urls:
                issuers.setdefault(str(server), []).append(name)
    return {
        "outages": [(o, sorted(issuers.get(o.directory_url, []))) for o in outages[:LIST_LIMIT]]
    }


def challenges_context() -> dict[str, Any]:
    in_flight = list(
        Challenge.objects.filter(finished=False, processing=True)
        .select_related("order", "order__request", "order__request__certificate")
        .order_by("scheduled_at", "id")[:LIST_LIMIT]
    )
    return {
        "challenges": [(c, challenge_step(c)) for c in in_flight],
        "challenges_more": max(
            0,
            Challenge.objects.filter(finished=False, processing=True).count() - len(in_flight),
        ),
    }


def backoff_context() -> dict[str, Any]:
    now = timezone.now()
    waiting = Certificate.objects.filter(next_retry_time__gt=now).order_by("next_retry_time")
    rows = list(waiting.select_related("issuer")[:LIST_LIMIT])
    return {
        "backoff": rows,
        "backoff_total": waiting.count(),
    }


def renewals_context() -> dict[str, Any]:
    now = timezone.now()
    due = Certificate.objects.filter(renewal_time__lte=now + RENEWAL_WINDOW).order_by(
        "renewal_time"
    )
    rows = list(due.select_related("issuer")[:LIST_LIMIT])
    return {
        "renewals": rows,
        "renewals_total": due.count(),
        "now": now,
    }


def approvals_context() -> dict[str, Any]:
    pending = CertificateRequest.objects.filter(approval=Approval.PENDING).order_by(
        "created_at", "id"
    )
    rows = list(pending.select_related("issuer", "certificate")[:5])
    return {
        "approvals": rows,
        "approvals_total": pending.count(),
    }


def notifications_context() -> dict[str, Any]:
    """Notification deliveries that failed in the last day: still retrying or given up."""
    since = timezone.now() - NOTIFICATION_WINDOW
    failing = Notification.objects.filter(
        state__in=(DeliveryState.RETRYING, DeliveryState.FAILED), attempted_at__gte=since
    )
    latest = (
        failing.select_related("channel")
        .only("title", "last_error", "state", "attempted_at", "channel__name")
        .order_by("-attempted_at", "-id")
        .first()
    )
    return {"notify_failures": failing.count(), "notify_latest": latest}


def deployments_context() -> dict[str, Any]:
    """Certificates whose endpoints do not all serve the current revision
    (docs/verifying-deployments.md): one query, whatever the number of certificates."""
    counts = certificate_counts(timezone.now())
    watched = sum(n for state, n in counts.items() if state)
    return {
        "deploy_watched": watched,
        "deploy_stale": counts["Stale"],
        "deploy_mismatch": counts["Mismatch"],
        "deploy_unreachable": counts["Unreachable"],
        "deploy_deployed": counts["Deployed"],
    }


def charts_context() -> dict[str, Any]:
    """The three charts (issuance/observability/stats.py: three grouped queries)."""
    return {"charts": charts(stats())}


SECTIONS: dict[str, Callable[[], dict[str, Any]]] = {
    "ca": ca_context,
    "counts": counts_context,
    "scheduler": scheduler_context,
    "challenges": challenges_context,
    "backoff": backoff_context,
    "renewals": renewals_context,
    "approvals": approvals_context,
    "charts": charts_context,
    "notifications": notifications_context,
    "deployments": deployments_context,
}


@permission_required("dashboard", "read", "mirrored-object")
def dashboard(request: HttpRequest) -> HttpResponse:
    """Scoped users get the mirrored section only (nothing of the console's own)."""
    context: dict[str, Any] = {}
    if sees_own_resources(request.user):
        for build in SECTIONS.values():
            context.update(build())
    context.update(clusters_context(request))
    return render_page(
        request,
        "console/dashboard.html",
        context,
        live_groups=mirror_live_groups(request, "dashboard"),
    )


@permission_required("dashboard", "read", "mirrored-object")
def dashboard_partial(request: HttpRequest, section: str) -> HttpResponse:
    if section == "clusters":
        return render(
            request, "console/partials/dashboard_clusters.html", clusters_context(request)
        )
    build = SECTIONS.get(section)
    if build is None:
        raise Http404(section)
    if not sees_own_resources(request.user):
        raise PermissionDenied("the console's own resources are outside your scope")
    return render(request, f"console/partials/dashboard_{section}.html", build())
