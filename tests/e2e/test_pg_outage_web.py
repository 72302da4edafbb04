"""The web process while PostgreSQL is down: 503s within 2 s, HTTP-01 from memory, recovery;
/healthz 200 throughout and /readyz 503 while it is down.

Real processes: a private PostgreSQL server (tests/e2e/pgserver.py; the shared one serves
other runs), `manage.py serve` on it with its worker, as deployed, and HTTP and WebSocket
clients. The server is stopped the way an operator does (fast shutdown) or killed with
SIGKILL (every pooled connection dies without a word), then started again under the same
serve process.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from issuance.worker.loop import IDLE_CAP
from tests.e2e.webstack import Answer, ServeStack, certificate_body, serve_on_private_postgres
from tests.helpers import wait_for

pytestmark = pytest.mark.e2e

LIST = "/api/v1/certificates/"
LIMIT = 2.0  # seconds: every answer during an outage comes within this
LOGGERS = ("issuance.availability", "issuance.worker")
RECOVERY = 5.0  # seconds from PostgreSQL answering again to requests succeeding
OUTAGE = 4.0  # seconds of requests while it is down
CLIENTS = 6
TOKEN = "outage-token_1"
KEY = f"{TOKEN}.thumbprint-of-the-account-key"
NEVER_FETCHED = "outage-token_2"  # presented, but this web process never looked it up

_names = itertools.count(1)


def _api_503(answer: Answer) -> None:
    assert answer.status == 503, answer
    assert answer.headers["content-type"] == "application/json", answer
    assert answer.json() == {
        "detail": "The database is unavailable; retry shortly.",
        "code": "database_unavailable",
    }
    assert int(answer.headers["retry-after"]) > 0
    assert "no-store" in answer.headers["cache-control"]


def _page_503(answer: Answer) -> None:
    assert answer.status == 503, answer
    assert answer.headers["content-type"].startswith("text/html"), answer
    assert b"The database is unavailable" in answer.body
    assert b"Traceback" not in answer.body


def _socket_refused(answer: Answer) -> None:
    # Refused before the handshake completes (the page's script retries later), not a 500.
    assert answer.status == 403, answer


def _known_token(answer: Answer) -> None:
    assert (answer.status, answer.body.decode()) == (200, KEY), answer


def _unknown_token(answer: Answer) -> None:
    # Not a 404: without the database the web app cannot know the token is not presented.
    assert answer.status == 503, answer


def _healthy(answer: Answer) -> None:
    # The process answers: a liveness probe must not get it restarted for the database.
    assert (answer.status, answer.json()) == (200, {"status": "ok"}), answer


def _not_ready(answer: Answer) -> None:
    assert answer.status == 503, answer
    assert answer.headers["content-type"] == "application/json", answer
    body = answer.json()
    assert (body["status"], body["database"]) == ("not ready", "unavailable"), answer
    assert body["reason"] == "database unavailable", answer


def _ready(answer: Answer) -> None:
    assert answer.status == 200, answer
    assert answer.json()["status"] == "ready", answer


REQUESTS: list[tuple[str, Callable[[ServeStack], Answer], Callable[[Answer], None]]] = [
    ("GET list", lambda s: s.call("GET", LIST), _api_503),
    (
        "POST create",
        lambda s: s.call("POST", LIST, certificate_body(f"during-{next(_names)}")),
        _api_503,
    ),
    ("page", lambda s: s.call("GET", "/", session=True), _page_503),
    ("live WebSocket", lambda s: s.websocket(), _socket_refused),
    ("HTTP-01 fetched before", lambda s: s.fetch_token(TOKEN), _known_token),
    ("HTTP-01 never fetched", lambda s: s.fetch_token(NEVER_FETCHED), _unknown_token),
    # The probes (console/probes.py), as a kubelet sends them: to an address, no session.
    ("/healthz", lambda s: s.call("GET", "/healthz", headers={"Host": "10.0.0.7"}), _healthy),
    ("/readyz", lambda s: s.call("GET", "/readyz", headers={"Host": "10.0.0.7"}), _not_ready),
]


def _during_outage(stack: ServeStack, client: int) -> list[tuple[str, Answer]]:
    """One client's requests, round after round, for OUTAGE seconds."""
    answers = []
    deadline = time.monotonic() + OUTAGE
    offset = client % len(REQUESTS)  # the clients start on different kinds
    while time.monotonic() < deadline:
        for name, send, _ in REQUESTS[offset:] + REQUESTS[:offset]:
            answers.append((name, send(stack)))
    return answers


def _outage_lines(logger: str, log: str) -> str:
    """The log's lines about the database (a string: pytest shows it whole, not shortened)."""
    lines = [line for line in log.splitlines() if "database" in line or "pool" in line.lower()]
    return f"{logger}: the database lines of the serve log\n" + "\n".join(lines[-60:])


def _round_succeeds(stack: ServeStack) -> bool:
    return all(stack.call("GET", LIST).status == 200 for _ in range(5))


def _all_succeed(stack: ServeStack, *, token: bool = True) -> None:
    _healthy(stack.call("GET", "/healthz"))
    _ready(stack.call("GET", "/readyz"))
    assert stack.call("GET", LIST).status == 200
    assert stack.call("POST", LIST, certificate_body(f"ok-{next(_names)}")).status == 201
    page = stack.call("GET", "/", session=True)
    assert page.status == 200 and b"The database is unavailable" not in page.body
    assert stack.websocket().status == 101
    if token:
        _known_token(stack.fetch_token(TOKEN))


@pytest.mark.parametrize("stop", ["fast", "kill"])
def test_web_answers_503_while_postgres_is_down_and_recovers(stop: str, e2e_workdir: Path) -> None:
    with serve_on_private_postgres(e2e_workdir) as stack:
        pid = stack.serve.popen.pid
        stack.present_http01({TOKEN: KEY, NEVER_FETCHED: f"{NEVER_FETCHED}.key"})
        # Before: everything works. The token's fetch is what the worker's self-check does
        # before asking the CA to validate; it leaves the answer in the web process's memory.
        _all_succeed(stack)
        try:
            if stop == "fast":
                stack.pg.stop()
            else:
                stack.pg.kill()
            with ThreadPoolExecutor(CLIENTS) as clients:
                rounds = list(clients.map(lambda c: _during_outage(stack, c), range(CLIENTS)))
            answers = [answer for one_client in rounds for answer in one_client]
        finally:
            if not stack.pg.running():
                stack.pg.start()
        back = time.monotonic()

        # During: every kind of request answered as it should, none slower than LIMIT.
        assert len(answers) >= CLIENTS * len(REQUESTS)
        checks = {name: check for name, _, check in REQUESTS}
        for name, answer in answers:
            assert answer.seconds < LIMIT, (name, answer)
            checks[name](answer)

        # After: the same process answers again within RECOVERY seconds, with no restart.
        # Recovered means a whole round succeeds: just after the server returns, a request
        # may still wait out the pool's timeout while the pool replaces dead connections.
        while not _round_succeeds(stack):
            assert time.monotonic() - back < RECOVERY, stack.serve.log()[-3000:]
            time.sleep(0.05)
        _all_succeed(stack, token=False)
        assert stack.serve.alive() and stack.serve.popen.pid == pid

        # One line each way from the web side, and (serve runs the worker too) at most one
        # each way from the worker. The worker notes the recovery at its next statement,
        # which an idle worker sends at its next poll: wait for that line.
        def lines(logger: str) -> tuple[int, int]:
            log = stack.serve.log()
            return (
                log.count(f"{logger} database unavailable ("),
                log.count(f"{logger} database available again after"),
            )

        def balanced() -> bool:
            return all(lines(name)[0] == lines(name)[1] for name in LOGGERS)

        wait_for(balanced, IDLE_CAP + 5, "the recovery logged")
        log = stack.serve.log()
        for logger in LOGGERS:
            down, up = lines(logger)
            assert down <= 1 and up == down, _outage_lines(logger, log)
        assert log.count("issuance.availability database unavailable (") == 1, _outage_lines(
            "issuance.availability", log
        )
        # The web side logs the outage once, and no request error (no traceback, no 500).
        assert "django.request" not in log and "Exception in ASGI application" not in log


def test_a_restart_between_two_requests(e2e_workdir: Path) -> None:
    """Killed and started again while no request came: the pooled connections are all dead
    and nobody noticed. The next request answers 200 (having waited for the pool to replace
    them) or, should the database refuse it too, 503 within the limit; the ones after it
    200."""
    with serve_on_private_postgres(e2e_workdir) as stack:
        with ThreadPoolExecutor(CLIENTS) as clients:  # several pooled connections
            assert {
                a.status for a in clients.map(lambda _: stack.call("GET", LIST), range(30))
            } == {200}
        stack.pg.kill()
        stack.pg.start()
        first = stack.call("GET", LIST)
        # The server is back: the request may wait out the pool's timeout while the pool
        # replaces its dead connections, then finds the database answering and waits for
        # the pool again (issuance.pooled_postgresql), a 200 within RECOVERY (2.7 s on a
        # loaded CI run); a 503 (the database's own connection refused too) within LIMIT.
        assert (first.status == 200 and first.seconds < RECOVERY) or (
            first.status == 503 and first.seconds < LIMIT
        ), first
        back = time.monotonic()
        # Recovered means a whole round succeeds: just after the server returns, a request
        # may still wait out the pool's timeout while the pool replaces dead connections.
        while not _round_succeeds(stack):
            assert time.monotonic() - back < RECOVERY, stack.serve.log()[-3000:]
            time.sleep(0.05)
        _all_succeed(stack, token=False)
