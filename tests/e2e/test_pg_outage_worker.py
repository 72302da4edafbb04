"""PostgreSQL stops under a running issuance and comes back: nothing is lost, duplicated or
failed, nobody restarts anything, and every certificate is Ready within 60 s of the
database answering again. Real processes throughout: a private PostgreSQL server
(tests/e2e/pgserver.py; the shared one serves other runs), Pebble, the web app and a worker,
all with their default settings.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from issuance.worker.loop import IDLE_CAP
from tests.e2e.pgserver import PgServer, private_postgres
from tests.e2e.stack import Stack, issuance_stack
from tests.helpers import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

OUTAGE = 10.0  # seconds the database is down
RECOVERY_LIMIT = 60.0  # every certificate Ready within this long after it answers again


def orders_started(stack: Stack) -> int:
    return int(stack.query("SELECT count(*) FROM issuance_order")[0][0])


def outage_while_issuing(stack: Stack, pg: PgServer, names: list[str], mode: str) -> float:
    """Create the certificates, take the database away mid-run for OUTAGE seconds; the
    seconds from it answering again to the last certificate Ready."""
    before = orders_started(stack)
    stack.create_certificates(names)
    deadline = time.monotonic() + 60
    while orders_started(stack) - before < len(names) // 4:  # well into the run
        assert time.monotonic() < deadline, "no orders made"
        time.sleep(0.05)
    assert len(stack.ready_names() & set(names)) < len(names), "finished before the outage"
    if mode == "kill":
        pg.kill()  # every server process SIGKILLed: connections die without a word
    else:
        pg.stop("fast")  # what an operator's `pg_ctlcluster … stop` does
    time.sleep(OUTAGE)
    pg.start()
    back = time.monotonic()
    ready = stack.wait_ready(names, timeout=RECOVERY_LIMIT + 60)
    return max(ready.values()) - back


def assert_nothing_lost_duplicated_or_failed(stack: Stack, count: int) -> None:
    failed = stack.query(
        "SELECT name, failed_issuance_attempts FROM issuance_certificate"
        " WHERE failed_issuance_attempts > 0 OR last_failure_time IS NOT NULL"
    )
    assert failed == [], f"a database outage became a failed issuance: {failed}"
    per_revision = stack.query(
        "SELECT certificate_id, revision, count(*) FROM issuance_certificaterequest"
        " GROUP BY certificate_id, revision HAVING count(*) > 1"
    )
    assert per_revision == [], "more than one CertificateRequest for a revision"
    per_request = stack.query(
        "SELECT request_id, count(*) FROM issuance_order GROUP BY request_id HAVING count(*) > 1"
    )
    assert per_request == [], "more than one Order for a request"
    ready = stack.query("SELECT count(*) FROM issuance_certificate WHERE state = 'Ready'")[0][0]
    assert ready == count
    # The timeline lost nothing either: entries the database refused were written later.
    issued = stack.query(
        "SELECT name, count(*) FROM issuance_event WHERE kind = 'Certificate'"
        " AND reason = 'Issued' GROUP BY name"
    )
    assert len(issued) == count and all(n == 1 for _name, n in issued), issued
    created = stack.query(
        "SELECT count(DISTINCT name), count(*) FROM issuance_event WHERE kind = 'Order'"
        " AND reason = 'Created'"
    )
    assert created == [(count, count)], created
    held = stack.query(
        "SELECT count(*) FROM issuance_certificate WHERE lease_owner <> ''"
        " UNION ALL SELECT count(*) FROM issuance_order WHERE lease_owner <> ''"
        " UNION ALL SELECT count(*) FROM issuance_challenge WHERE lease_owner <> ''"
    )
    assert [row[0] for row in held] == [0, 0, 0], "rows still leased after the run"


def test_postgres_stopped_then_killed_mid_run_everything_recovers_by_itself(
    tmp_path: Path,
) -> None:
    with (
        private_postgres(tmp_path) as pg,
        issuance_stack(tmp_path, pg.url) as stack,
    ):
        stack.create_acme_issuer()
        web, worker = stack.web, stack.workers[0]
        assert web is not None

        first = [f"stop-{i:02d}" for i in range(40)]
        recovered = outage_while_issuing(stack, pg, first, mode="fast")
        print(f"fast shutdown: all {len(first)} Ready {recovered:.1f} s after the database")
        assert recovered <= RECOVERY_LIMIT

        second = [f"kill-{i:02d}" for i in range(20)]
        recovered = outage_while_issuing(stack, pg, second, mode="kill")
        print(f"kill -9: all {len(second)} Ready {recovered:.1f} s after the database")
        assert recovered <= RECOVERY_LIMIT

        # The same processes all along: nobody restarted anything.
        stack.check_alive()
        assert stack.web is web and stack.workers == [worker]
        assert_nothing_lost_duplicated_or_failed(stack, len(first) + len(second))
        # One line per outage and one per recovery, not one per failed attempt. A worker
        # notes the recovery at a statement at least SETTLE after the last failure; one
        # that finished everything sooner (a loaded machine) goes idle and sends it at
        # its next poll: wait for that line.
        wait_for(
            lambda: worker.log().count("database available again") >= 2,
            IDLE_CAP + 5,
            "the second recovery logged",
        )
        log = worker.log()
        assert log.count("database unavailable") == 2, log[-5000:]
        assert log.count("database available again") == 2, log[-5000:]
        assert "Traceback" not in log, log[-5000:]
