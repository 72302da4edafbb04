"""Browser tests: the real app (`manage.py serve`: web + worker) against the test database,
driven by the system Chromium through Playwright. Never downloads a browser."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"
SCREENSHOTS = ARTIFACTS / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The server is another process, so an SQLite test database must be a file when browser
    tests run. Decided after collection and deselection (and before any database exists),
    so a run without browser tests keeps the in-memory test database."""
    if not any(item.get_closest_marker("browser") for item in items):
        return
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3") and not (db.get("TEST") or {}).get("NAME"):
        name = ROOT / "var" / f"test-browser-{os.getpid()}.sqlite3"
        name.parent.mkdir(exist_ok=True)
        db.setdefault("TEST", {})["NAME"] = str(name)


def _database_url() -> str:
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        name = str(db["NAME"])
        if name.startswith("file:") or name == ":memory:":
            pytest.fail(
                "browser tests need a file SQLite test database shared with the server "
                "process: set SQLITE_TEST_NAME=var/test-browser.sqlite3"
            )
        return f"sqlite:///{name}"
    user = quote(str(db.get("USER") or ""))
    password = db.get("PASSWORD") or ""
    auth = f"{user}:{quote(str(password))}@" if password else (f"{user}@" if user else "")
    return (
        f"postgresql://{auth}{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        try:
            # Our own server on 127.0.0.1 (http), not a user-supplied URL.
            with urllib.request.urlopen(url + "/login/", timeout=2) as response:  # noqa: S310
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    pytest.fail(f"serve did not answer within {timeout}s:\n{log.read_text()[-4000:]}")


@pytest.fixture(autouse=True)
def sync_orm_beside_playwright(monkeypatch: pytest.MonkeyPatch) -> None:
    """Playwright's sync API keeps an asyncio loop marked running on the main thread while a
    browser is open, so Django's async guard would refuse the (synchronous) ORM calls the
    tests make between browser steps. Lifted for browser tests only; the browser itself is
    closed after each module, so later tests run with the guard on."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(autouse=True)
def committed(sync_orm_beside_playwright: None, transactional_db: None) -> None:
    """The server process must see what a test writes: every browser test commits (a
    transactional test). Role groups are made by the user builders (tests/factories.py)."""


@pytest.fixture
def start_server(
    transactional_db: None, request: pytest.FixtureRequest
) -> Iterator[Callable[..., str]]:
    """Start `manage.py serve` (uvicorn + the reconcile worker); returns its base URL.

    `port` (default: a free one) and `env` (extra settings) let a test put the app where an
    ACME CA validates HTTP-01; `worker=False` serves without the worker (`--no-worker`).
    Servers are stopped before the test database is flushed.
    """
    procs: list[subprocess.Popen[bytes]] = []

    def start(
        port: int | None = None, env: dict[str, str] | None = None, *, worker: bool = True
    ) -> str:
        port = port or _free_port()
        ARTIFACTS.mkdir(exist_ok=True)
        log = ARTIFACTS / f"serve-{request.node.name}.log"
        child_env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
        defaults = {
            "DATABASE_URL": _database_url(),
            "DEBUG": "0",
            "SECRET_KEY": settings.SECRET_KEY,
            "KEY_ENCRYPTION_KEY": settings.KEY_ENCRYPTION_KEY,
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "WORKER_THREADS": "2",
            "REDIS_URL": "",
        }
        child_env.update({**defaults, **(env or {})})  # `env` may override any of these
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [
                    *(sys.executable, "manage.py", "serve", "--host", "127.0.0.1"),
                    *("--port", str(port)),
                    *(() if worker else ("--no-worker",)),
                ],
                cwd=ROOT,
                env=child_env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        _wait_until_up(base, proc, log)
        return base

    yield start
    for proc in procs:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture
def server(start_server: Callable[..., str]) -> str:
    """The app on a free port, with default settings."""
    return start_server()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install the Debian chromium package")
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def new_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Pages in fresh contexts (one per user), closed after the test. The base URL is the
    `server` fixture's unless given."""
    contexts: list[Any] = []

    def make(base_url: str | None = None) -> Any:
        base = base_url or request.getfixturevalue("server")
        context = browser.new_context(base_url=base, viewport={"width": 1366, "height": 900})
        context.set_default_timeout(15_000)
        contexts.append(context)
        page = context.new_page()
        page.on("dialog", lambda dialog: dialog.accept())
        return page

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Callable[[Any, str], Path]:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page: Any, step: str) -> Path:
        path = SCREENSHOTS / f"{request.node.name}-{step}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def quiet_server(start_server: Callable[..., str]) -> str:
    """The console without its worker (`serve --no-worker`), so the seeded rows stay as they
    were made while the pages are read (the accessibility sweep, the documentation's
    screenshots); otherwise the settings of the `server` fixture."""
    return start_server(worker=False)


@pytest.fixture
def seeded(role_users: dict[str, User]) -> None:
    """A console with something in every state on every page (tests/browser/seeded_console.py)."""
    from tests.browser.seeded_console import seed_console

    seed_console()
