"""Deleting Certificates while the worker issues them (issue 28, item 6), on PostgreSQL.

The worker runs with its defaults (WORKER_THREADS threads) against a real Pebble and a CA
issuer; certificates are deleted at every stage of their issuance — just created, with a
private key and a request, with an ACME order and challenges in flight, just issued — many
times over. Afterwards: no deadlock (PostgreSQL's own counter for the database, and no
deadlock in any log line), no error logged by the worker, and nothing left of the deleted
certificates (requests, orders, challenges, secrets, queued work).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
from django.db import connection

from issuance.models import (
    Certificate,
    CertificateRequest,
    Challenge,
    Issuer,
    Order,
    Secret,
)
from issuance.operations import actions
from issuance.worker.wakeup import notify_workers
from tests.e2e.background import ECDSA, all_ready, running_worker, warm_up
from tests.e2e.conftest import AcmeStack
from tests.factories import make_ca_issuer, make_certificate
from tests.helpers import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(300)]

ROUNDS = 8
PER_ROUND = 10


def _deadlocks() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_stat_clear_snapshot()")
        cur.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        row = cur.fetchone()
    return int(row[0]) if row else 0


def _stage(round_: int, names: list[str]) -> Callable[[], bool]:
    """When round N deletes: at once, once requests exist, once orders exist, once some
    are issued — in turn, so every stage of issuance is hit several times."""
    stages: list[Callable[[], bool]] = [
        lambda: True,
        lambda: CertificateRequest.objects.filter(certificate__name__in=names).exists(),
        lambda: (
            Order.objects.filter(request__certificate__name__in=names).exists()
            or Certificate.objects.filter(name__in=names, revision__isnull=False).exists()
        ),
        lambda: Certificate.objects.filter(name__in=names, revision__isnull=False).exists(),
    ]
    return stages[round_ % len(stages)]


def test_deleting_certificates_during_issuance_never_deadlocks(
    acme_stack: Callable[..., AcmeStack], caplog: pytest.LogCaptureFixture
) -> None:
    stack = acme_stack()
    acme = stack.make_issuer()
    ca = make_ca_issuer(name="del-ca", secret_name="del-ca-tls")
    before = _deadlocks()
    deleted: list[str] = []
    caplog.set_level(logging.INFO)
    with running_worker():
        warm_up(acme, "del-warm")
        for round_ in range(ROUNDS):
            names = [f"del-{round_}-{i}" for i in range(PER_ROUND)]
            for i, name in enumerate(names):
                issuer: Issuer = acme if i % 2 == 0 else ca
                make_certificate(name, issuer, dnsNames=[f"{name}.example.test"], privateKey=ECDSA)
            notify_workers()
            wait_for(_stage(round_, names), 60, f"round {round_} reaches its stage")
            result = actions.delete_certificates(names, "tester", delete_secrets=True)
            assert result == {name: "" for name in names}
            deleted += names
        # The worker carries on with what is left: a certificate made now is issued.
        make_certificate("del-after", acme, dnsNames=["del-after.example.test"], privateKey=ECDSA)
        notify_workers()
        wait_for(lambda: all_ready(["del-after"]), 90, "a certificate after the deletions")
        # Give in-flight passes on deleted rows time to end before counting what is left.
        time.sleep(2)
    assert not Certificate.objects.filter(name__in=deleted).exists()
    assert (
        not CertificateRequest.objects.filter(name__startswith="del-")
        .exclude(certificate__name__in=["del-warm", "del-after"])
        .exists()
    ), "requests of deleted certificates are left"
    assert not Order.objects.filter(request__certificate__isnull=True).exists()
    assert not Challenge.objects.filter(order__request__certificate__isnull=True).exists()
    assert not Secret.objects.filter(name__in=[f"{n}-tls" for n in deleted]).exists(), (
        "secrets of deleted certificates are left"
    )
    problems = [
        f"{r.levelname} {r.name}: {r.getMessage()}"
        for r in caplog.records
        if r.levelno >= logging.ERROR or "deadlock" in r.getMessage().lower()
    ]
    assert problems == []
    # PostgreSQL counts detected deadlocks per database; its statistics reach the view once
    # the backend that saw one flushes them (at most a second or so after a transaction).
    time.sleep(1.5)
    assert _deadlocks() == before
