"""Pebble validates HTTP-01 against the standalone solver (`http01_solver`'s server), not the
web app: the deployment where the console is not public. Real Pebble, real sockets, the
real worker; the solver reads the same (test) database from its own threads."""

from __future__ import annotations

import threading
from collections.abc import Callable
from unittest.mock import patch

import pytest
from django.db import connection

from issuance.management.commands.http01_solver import SolverHandler, make_server
from issuance.models import Certificate, Challenge, Secret
from tests.e2e.conftest import AcmeStack, Drive, acme_stack, drive, e2e_workdir  # noqa: F401
from tests.e2e.servers import verify_chain
from tests.factories import make_certificate

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


def test_pebble_validates_through_the_standalone_solver(
    acme_stack: Callable[..., AcmeStack],  # noqa: F811
    drive: Drive,  # noqa: F811
) -> None:
    stack = acme_stack(serve_http01=False)
    served: list[str] = []
    original = SolverHandler._answer

    def counting(self: SolverHandler, with_body: bool) -> None:
        served.append(self.path)
        if connection.vendor == "sqlite":
            # The test database is in-memory with a shared cache, where a reading thread
            # holds table locks that make the worker's writes fail ("table is locked");
            # uncommitted reads take none. (A real SQLite file in WAL mode has no such issue.)
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA read_uncommitted = 1")
        original(self, with_body)

    answering = patch.object(SolverHandler, "_answer", counting)
    answering.start()
    server = make_server("127.0.0.1", stack.http_port)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        issuer = stack.make_issuer("solver")
        names = ["s1.example.test", "s2.example.test", "s3.example.org"]
        make_certificate("via-solver", issuer, dnsNames=names, privateKey={"algorithm": "ECDSA"})
        drive(
            lambda: (
                Certificate.objects.get(name="via-solver").condition_is("Ready")
                and not Challenge.objects.filter(presented=True).exists()
            ),
            120,
        )
    finally:
        answering.stop()
        server.shutdown()
        server.server_close()
    cert = Certificate.objects.get(name="via-solver")
    verify_chain(Secret.objects.get(name=cert.secret_name).tls_crt, stack.pebble.roots())
    challenges = Challenge.objects.filter(order__request__certificate=cert)
    assert {c.state for c in challenges} == {"valid"}
    tokens = {c.token for c in challenges}
    # Each token was fetched by our self-check and by Pebble (several perspectives).
    for token in tokens:
        hits = [p for p in served if p.endswith("/" + token)]
        assert len(hits) >= 2, (token, served)
    assert all(not c.presented for c in challenges)
