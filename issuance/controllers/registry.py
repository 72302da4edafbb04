"""Which controllers the worker runs, and the global steps of each loop (see
docs/architecture.md, "The controller contract" and "The worker")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import Model

from issuance.controllers.base import Result


@dataclass(frozen=True)
class Controller:
    name: str
    model: type[Model]
    reconcile: Callable[[Any], Result]
    # Per-item error backoff: ACME calls 5 s → 30 min, everything else 1 s → 30 s.
    acme_backoff: bool = False
    # Related rows the reconcile reads, loaded with the row in one query (select_related).
    related: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step:
    """A global step run once per worker loop (e.g. the challenge scheduler); returns did-work."""

    name: str
    run: Callable[[], bool]
    # Set by whoever makes work for the step; the busy worker loop then runs it at once
    # (otherwise every STEP_INTERVAL).
    urgent: threading.Event | None = None


def controllers() -> list[Controller]:
    from issuance.controllers import (
        certificaterequests,
        certificates,
        challenges,
        issuers,
        orders,
        revocations,
        webhookdeliveries,
    )
    from issuance.models import (
        Certificate,
        CertificateRequest,
        Challenge,
        Issuer,
        Order,
        Revocation,
        WebhookDelivery,
    )

    return [
        Controller("issuers", Issuer, issuers.reconcile, acme_backoff=True),
        Controller("certificates", Certificate, certificates.reconcile, related=("issuer",)),
        Controller(
            "certificaterequests",
            CertificateRequest,
            certificaterequests.reconcile,
            related=("issuer", "certificate"),
        ),
        Controller(
            "orders",
            Order,
            orders.reconcile,
            acme_backoff=True,
            related=("issuer", "request__certificate"),
        ),
        Controller(
            "challenges",
            Challenge,
            challenges.reconcile,
            acme_backoff=True,
            related=("issuer", "order__request__certificate"),
        ),
        Controller(
            "revocations", Revocation, revocations.reconcile, acme_backoff=True, related=("issuer",)
        ),
        # issuance-webhooks: notices of new revisions, POSTed outside the certificate's pass
        Controller(
            "webhookdeliveries", WebhookDelivery, webhookdeliveries.reconcile, related=("webhook",)
        ),
    ]


def steps() -> list[Step]:
    from issuance.controllers import scheduler
    from issuance.kubernetes.certmanager import (
        sync as cluster_sync,  # one cheap query while no clusters
    )
    from issuance.kubernetes.csr_connector import connector  # a no-op unless KUBE_CONNECTOR=1
    from issuance.notifications import step as notifications
    from issuance.probing import runner as probes
    from issuance.probing import schedule as probe_schedule

    return [
        Step("challenge-scheduler", scheduler.schedule_pass, urgent=scheduler.queue_changed),
        Step("kube-connector", connector.step),
        Step("cluster-sync", cluster_sync.step, urgent=cluster_sync.changed),
        Step("notifications", notifications.step, urgent=notifications.wake),
        # Endpoint probes, on threads of their own: the step only claims and hands them out.
        Step("endpoint-probes", probes.step, urgent=probe_schedule.wake),
    ]
