"""Fixtures for end-to-end tests against real Pebble (and the app serving HTTP-01).

`acme_stack()` (a factory) starts pebble-challtestsrv and Pebble for one test, serves the
Django app on Pebble's HTTP-01 port from a thread, and points the self-check at the same
DNS (challtestsrv answers every A query with 127.0.0.1). Pass `dns_server=` to have Pebble
resolve through another DNS (e.g. the BIND9 fixture for DNS-01). Logs stay in
var/e2e/<test>/ for debugging.

Drive issuance with `drive(until, timeout)`: the real worker (issuance.worker.Worker),
in this process, until the condition holds.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
from django.utils import timezone
from pytest_django import Settings

from issuance.acme import ratelimit
from issuance.acme.accounts import forget_clients
from issuance.models import Issuer
from tests.e2e.servers import (
    REPO,
    ChallTestSrv,
    DjangoThreadServer,
    PebbleServer,
    free_port,
    start_challtestsrv,
    start_pebble,
)


@dataclass
class AcmeStack:
    pebble: PebbleServer
    dns: ChallTestSrv
    http_port: int
    workdir: Path
    web: DjangoThreadServer | None = None
    issuers: list[Issuer] = field(default_factory=list)

    def issuer_spec(self, **acme: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "server": self.pebble.directory_url,
            "email": "e2e@example.test",
            "caBundle": self.pebble.ca_bundle_b64,
            "solvers": [{"http01": {}}],
        }
        spec.update(acme)
        return {"acme": spec}

    def make_issuer(self, name: str = "pebble", **acme: Any) -> Issuer:
        issuer = Issuer.objects.create(
            name=name, kind="acme", spec=self.issuer_spec(**acme), due_at=timezone.now()
        )
        self.issuers.append(issuer)
        return issuer


@pytest.fixture
def e2e_workdir(request: pytest.FixtureRequest) -> Path:
    """var/e2e/<test>-<random>/: unique, so concurrent runs of the same test never collide."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)[:80]
    root = REPO / "var" / "e2e"
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=root))


@pytest.fixture
def acme_stack(
    e2e_workdir: Path, settings: Settings, transactional_db: None
) -> Iterator[Callable[..., AcmeStack]]:
    started: list[AcmeStack] = []

    def start(
        *,
        eab_required: bool = False,
        dns_server: str | None = None,
        pebble_env: dict[str, str] | None = None,
        serve_http01: bool = True,
    ) -> AcmeStack:
        dns = start_challtestsrv(e2e_workdir)
        http_port = free_port()
        pebble = start_pebble(
            e2e_workdir,
            http_port=http_port,
            dns_server=dns_server or dns.dns_address,
            eab_required=eab_required,
            env=pebble_env,
        )
        stack = AcmeStack(pebble=pebble, dns=dns, http_port=http_port, workdir=e2e_workdir)
        started.append(stack)
        if serve_http01:
            stack.web = DjangoThreadServer(http_port)
        settings.HTTP01_SELF_CHECK_PORT = http_port
        settings.SELF_CHECK_NAMESERVERS = [dns.dns_address]
        return stack

    ratelimit.forget_cache()
    forget_clients()
    yield start
    for stack in started:
        if stack.web is not None:
            stack.web.stop()
        stack.pebble.stop()
        stack.dns.stop()
    forget_clients()
    ratelimit.forget_cache()


class Drive(Protocol):
    """The `drive` fixture: run the worker until `until()` is true, at most `timeout` s."""

    def __call__(
        self, until: Callable[[], bool], timeout: float = 60.0, threads: int = 1
    ) -> None: ...


@pytest.fixture
def drive() -> Drive:
    """Run the real worker in this process until `until()` is true (or fail after `timeout`)."""
    from issuance.worker.loop import Worker

    def run(until: Callable[[], bool], timeout: float = 60.0, threads: int = 1) -> None:
        worker = Worker(threads=threads)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                worker.run_once()
                if until():
                    return
                time.sleep(0.05)
        finally:
            worker.close()
        raise AssertionError(f"condition not reached within {timeout}s")

    return run
