"""Running schemathesis against `manage.py serve` for the API contract tests
(tests/contract/test_schemathesis*.py; the `served` fixture is in conftest.py).

`manage.py serve` runs on this test run's PostgreSQL database, filled by tests.contract.world;
schemathesis reads /api/schema/ and runs every phase (examples, coverage, fuzzing, stateful)
with every check, the seed and the examples per operation of tests/contract/schemathesis.toml.
Any failure (a server error, an undocumented status, a response that does not match its
schema, invalid input accepted, valid input refused) fails the test with schemathesis's
report, which includes a curl command to reproduce each one.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from tests.contract.world import Credentials, build
from tests.e2e.servers import free_port, manage_py, wait_for_tcp

# A guard against a run that hangs, not a speed target: the coverage phase sends every
# boundary case of the spec shapes (issuance/api/spec_schemas.py), ~31,000 requests in all,
# 4.3 min on an idle 2-core machine; `make test` runs both passes and the checks at once,
# and there a single run over the whole API once took longer than 25 min.
RUN_TIMEOUT = 2400
# Each contract module's pytestmark: PostgreSQL (the served process and the test share the
# test database, committed rows: a transactional test), and room for the run.
MARKS = [
    pytest.mark.postgres,
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(RUN_TIMEOUT + 120),
]

SCHEMATHESIS = [sys.executable, "-m", "schemathesis.cli"]
CONFIG = Path(__file__).with_name("schemathesis.toml")
BOOTSTRAP_PATHS = "^/api/v1/bootstrap/"
# Two thirds of the main API's cases are the Certificate spec's (POST, PUT and PATCH of
# /api/v1/certificates/): run on their own (test_schemathesis_certificates.py), in a
# pytest-xdist process beside the rest of the API's.
CERTIFICATE_PATHS = "^/api/v1/certificates/"


@dataclass(frozen=True)
class Served:
    url: str
    credentials: Credentials


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str
    statuses: Counter[int]  # status code → responses, from the run's HAR report

    def report(self) -> str:
        """The part of the output that says what failed (or all of it, if short)."""
        start = self.output.find("= FAILURES =")
        return self.output[start - 40 :] if start > 0 else self.output[-6000:]


@contextmanager
def serving(workdir: Path) -> Iterator[Served]:
    """`manage.py serve` (the web app, no worker: the rows stay as the world left them)."""
    credentials = build()
    db = settings.DATABASES["default"]
    port = free_port()
    env = {
        "DATABASE_URL": f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "SECRET_KEY": secrets.token_urlsafe(40),
        "KEY_ENCRYPTION_KEY": settings.KEY_ENCRYPTION_KEY,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "LOG_LEVEL": "WARNING",
    }
    serve = manage_py(workdir, ["serve", "--no-worker", "--port", str(port)], env, name="serve")
    try:
        wait_for_tcp("127.0.0.1", port, timeout=60, process=serve)
        yield Served(f"http://127.0.0.1:{port}", credentials)
    finally:
        serve.stop()


def run_schemathesis(
    served: Served, authorization: str, selection: list[str], workdir: Path
) -> Run:
    har = workdir / "schemathesis.har"
    argv = [
        *SCHEMATHESIS,
        "--config-file",
        str(CONFIG),
        "--no-color",
        "run",
        f"{served.url}/api/schema/?format=json",
        "--checks",
        "all",
        "--header",
        f"Authorization: {authorization}",
        *selection,
        "--report",
        "har",
        "--report-har-path",
        str(har),
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=workdir, check=False
    )
    entries = json.loads(har.read_text())["log"]["entries"] if har.exists() else []
    statuses = Counter(int(entry["response"]["status"]) for entry in entries)
    return Run(done.returncode, done.stdout + done.stderr, statuses)


def assert_clean(run: Run, expected: set[int]) -> None:
    assert run.returncode == 0, run.report()  # schemathesis exits 1 on any failure
    assert not [s for s in run.statuses if s >= 500], run.statuses
    # The run reached the API's logic, not only its front door.
    assert expected <= set(run.statuses), (sorted(run.statuses), run.report())
