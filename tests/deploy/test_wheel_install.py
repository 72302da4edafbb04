"""The wheel, installed as an operator installs it (docs/deploying.md): built from the
package's sources alone, installed into a fresh virtualenv outside the checkout, and run
from outside it with nothing but the `issuance-console` command: migrate, an admin and its
API token, serve (web and worker) on a private PostgreSQL server, the login page and its
CSS, a self-signed certificate issued through the API, the probes.

The dependencies are installed from the machine's configured package index through pip's
cache, pinned by constraints.txt, without compiling bytecode (it is what takes longest).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from tests.e2e.pgserver import private_postgres
from tests.e2e.servers import free_port, start_process, wait_for_tcp
from tests.helpers import wait_for

# Building and installing take about a minute on an idle machine; much more on a loaded one.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
# What the wheel is built from: the packaging, the packages and the agent, and the RBAC file
# that console/rbac/ links to. Nothing else of the checkout.
SOURCES = ["pyproject.toml", "console", "issuance", "agent", "docs/rbac"]


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the checkout (the build, the virtualenv, the processes' cwd)."""
    path = Path(tempfile.mkdtemp(prefix="issuance-wheel-"))
    assert not path.is_relative_to(ROOT)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> str:
    result = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{argv} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def _build_and_install(outside: Path) -> tuple[Path, dict[str, float]]:
    timings: dict[str, float] = {}
    src = outside / "src"
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, src / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    started = time.monotonic()
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(outside / "dist"),
            str(src),
        ],
        env,
        outside,
    )
    timings["wheel"] = time.monotonic() - started
    [wheel] = list((outside / "dist").glob("issuance_console-*.whl"))
    venv = outside / "venv"
    started = time.monotonic()
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env, outside)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "-q",
            "--no-compile",
            "-c",
            str(ROOT / "constraints.txt"),
            str(wheel),
        ],
        env,
        outside,
    )
    timings["install"] = time.monotonic() - started
    return venv, timings


def _get(
    port: int, path: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Host": "127.0.0.1", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def _api(port: int, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Host": "127.0.0.1", "Authorization": f"Token {token}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def test_the_installed_wheel_migrates_serves_and_issues(outside: Path) -> None:
    venv, timings = _build_and_install(outside)
    command = str(venv / "bin" / "issuance-console")
    python = str(venv / "bin" / "python")
    base_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL", "DEBUG")
    }
    work = outside / "run"
    work.mkdir()

    # The packages and their files come from the virtualenv, not the checkout.
    where = _run(
        [
            python,
            "-c",
            "import console, issuance, issuance_agent; print(console.__file__, issuance.__file__, issuance_agent.__file__)",
        ],
        base_env,
        work,
    )
    for path in where.split():
        assert Path(path).is_relative_to(venv), where
    assert _run([command, "--version"], base_env, work).strip() == "issuance-console 0.1.0"
    assert "--certificate" in _run([str(venv / "bin" / "issuance-agent"), "--help"], base_env, work)

    with private_postgres(work) as pg:
        env = {
            **base_env,
            "DATABASE_URL": pg.url,
            "SECRET_KEY": secrets.token_urlsafe(40),
            "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        }
        started = time.monotonic()
        _run([command, "migrate", "--noinput", "-v0"], env, work)
        timings["migrate"] = time.monotonic() - started
        admin_env = {**env, "DJANGO_SUPERUSER_PASSWORD": secrets.token_urlsafe(20)}
        _run(
            [
                command,
                "createsuperuser",
                "--noinput",
                "--username",
                "admin",
                "--email",
                "admin@example.test",
            ],
            admin_env,
            work,
        )
        token = _run([command, "api_token", "admin", "--name", "wheel test"], env, work).strip()
        assert re.fullmatch(r"\S{20,}", token)

        port = free_port()
        serve = start_process("serve", [command, "serve", "--port", str(port)], work, env, cwd=work)
        try:
            wait_for_tcp("127.0.0.1", port, timeout=60, process=serve)
            status, _, page = _get(port, "/login/")
            assert status == 200, page[:500]
            css = re.findall(rb'href="(/static/css/[^"]+\.css)"', page)
            assert b"/static/css/console.css" in css
            for href in css:
                status, headers, body = _get(port, href.decode())
                assert status == 200 and headers["content-type"].startswith("text/css"), href
                assert body
            assert _get(port, "/healthz")[0] == 200
            status, _, ready = _get(port, "/readyz")
            assert status == 200 and json.loads(ready)["status"] == "ready"

            issuer = {"name": "selfsigned", "spec": {"selfSigned": {}}}
            assert _api(port, token, "POST", "/api/v1/issuers/", issuer)[0] == 201
            cert = {
                "name": "web",
                "spec": {
                    "secretName": "web-tls",
                    "dnsNames": ["web.example.test"],
                    "issuerRef": {"name": "selfsigned", "kind": "Issuer"},
                    "privateKey": {"algorithm": "ECDSA", "size": 256},
                },
            }
            status, created = _api(port, token, "POST", "/api/v1/certificates/", cert)
            assert status == 201, created

            def issued() -> bool:
                answer = _api(port, token, "GET", "/api/v1/certificates/web/")[1]
                return bool(answer["status"].get("revision") == 1)

            wait_for(issued, timeout=60, what="the certificate issued by the installed worker")
            # The worker in `serve` beats: the installed probe command sees it.
            check = _run([command, "reconcile", "--check"], env, work)
            assert check.startswith("ok: worker ")
        finally:
            serve.stop()
    print(f"wheel install timings (s): {json.dumps({k: round(v, 1) for k, v in timings.items()})}")
