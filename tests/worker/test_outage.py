"""The worker's database-outage bookkeeping: one line each way, and the outage's length."""

from __future__ import annotations

import logging
import time

import pytest

from issuance.worker.outage import SETTLE, DatabaseOutage
from tests.dbfaults import connection_error


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(time, "monotonic", fake)  # the module reads time.monotonic()
    return fake


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "issuance.worker"]


@pytest.fixture
def down(caplog: pytest.LogCaptureFixture) -> DatabaseOutage:
    """An outage just noted (its INFO lines captured)."""
    caplog.set_level(logging.INFO, "issuance.worker")
    outage = DatabaseOutage()
    outage.failed(connection_error())
    return outage


def test_the_length_ends_at_the_first_success_even_when_it_is_logged_later(
    clock: Clock, down: DatabaseOutage, caplog: pytest.LogCaptureFixture
) -> None:
    clock.now += 2.0
    down.failed(connection_error())  # still down: no second line
    clock.now += 0.5
    down.ok()  # back, but too soon after a failure to call it over
    assert down.active
    clock.now += 30  # an idle worker's next statement, at its next poll
    down.ok()
    assert not down.active
    noted = [r.getMessage() for r in caplog.get_records("setup") if r.name == "issuance.worker"]
    assert len(noted) == 1 and noted[0].startswith("database unavailable (")
    # The second failure added no line (the records so far are this test's own).
    assert lines(caplog) == ["database available again after 2.5 s"]


def test_a_failure_after_a_success_moves_the_end(
    clock: Clock, down: DatabaseOutage, caplog: pytest.LogCaptureFixture
) -> None:
    clock.now += SETTLE / 2
    down.ok()  # a backend that had not died yet answered
    clock.now += 0.2
    down.failed(connection_error())
    clock.now += 3.0
    down.ok()
    assert not down.active
    assert lines(caplog)[-1] == f"database available again after {SETTLE / 2 + 3.2:.1f} s"
    assert down.outages == 1
