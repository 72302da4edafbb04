"""A real OpenID Provider for the tests: node-oidc-provider run by tests/oidc/provider.mjs on
a free port with the machine's Node.js (installed by `make node-deps`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import requests

from tests.e2e.servers import free_port

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "oidc" / "provider.mjs"
CLIENT_ID = "issuance-console"
CLIENT_SECRET = "test-client-secret-0123456789abcdef"


class Account(TypedDict):
    sub: str
    groups: list[str]


# Logins at the provider (any password): their sub differs from the username on purpose.
ACCOUNTS: dict[str, Account] = {
    "alice": {"sub": "4f1c0a7e-alice", "groups": ["console-admins", "everyone"]},
    "olga": {"sub": "9b2d11c3-olga", "groups": ["ops", "everyone"]},
    "nadia": {"sub": "77aa0c55-nadia", "groups": ["everyone", "contractors"]},
    "bob": {"sub": "0c3e9d21-bob", "groups": ["ops"]},
    "zoe": {"sub": "51e0b7aa-zoe", "groups": ["guests"]},  # no rule gives guests a role
}


@dataclass
class RunningProvider:
    issuer: str
    port: int
    secret_file: Path

    def set_mode(self, mode: str) -> None:
        """How the token endpoint misbehaves (tests/oidc/provider.mjs)."""
        answer = requests.post(f"{self.issuer}/__test/mode", params={"mode": mode}, timeout=5)
        answer.raise_for_status()
        assert answer.json()["mode"] == mode

    def jwks_reads(self) -> int:
        answer = requests.get(f"{self.issuer}/__test/mode", timeout=5)
        answer.raise_for_status()
        return int(answer.json()["jwks_reads"])

    def console_env(self, **extra: str) -> dict[str, str]:
        """The console's settings for this provider."""
        return {
            "OIDC_ISSUER_URL": self.issuer,
            "OIDC_CLIENT_ID": CLIENT_ID,
            "OIDC_CLIENT_SECRET_FILE": str(self.secret_file),
            "OIDC_SCOPES": "openid profile email groups",
            "OIDC_PROVIDER_NAME": "Test IdP",
            **extra,
        }


@contextmanager
def running_provider(
    workdir: Path,
    console_bases: Sequence[str],
    accounts: Mapping[str, Account] = ACCOUNTS,
) -> Iterator[RunningProvider]:
    """The provider on a free port, knowing the consoles (base URLs) that may use it.

    Its issuer is http://localhost:PORT while the console is http://127.0.0.1:PORT: the two
    keep their cookies apart in the browser, as two hosts would."""
    node = shutil.which("node")
    assert node, "Node.js is missing: `make node-deps` installs it"
    assert (ROOT / "node_modules" / "oidc-provider").is_dir(), "run `make node-deps`"
    port = free_port()
    issuer = f"http://localhost:{port}"
    secret_file = workdir / "oidc-client-secret"
    secret_file.write_text(CLIENT_SECRET + "\n")
    config = workdir / "oidc-provider.json"
    config.write_text(
        json.dumps(
            {
                "issuer": issuer,
                "client_id": CLIENT_ID,
                "client_secret": CLIENT_SECRET,
                "redirect_uris": [f"{base}/login/sso/callback/" for base in console_bases],
                "post_logout_redirect_uris": [f"{base}/login/" for base in console_bases],
                "accounts": dict(accounts),
            }
        )
    )
    log = workdir / "oidc-provider.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [node, str(SCRIPT), str(port), str(config)], cwd=ROOT, stdout=out, stderr=out
        )
    try:
        deadline = time.monotonic() + 30
        while "READY" not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the OpenID Provider did not start:\n{log.read_text()}")
            time.sleep(0.1)
        yield RunningProvider(issuer, port, secret_file)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
