"""The web app under real uvicorn, on the test database (for tests that need a real server)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from tests.e2e.servers import free_port, start_uvicorn


@contextmanager
def uvicorn_on_test_database(workdir: Path, **env: str) -> Iterator[int]:
    """Serve console.asgi on a free port (yielded) against this test run's PostgreSQL
    database; rows the test reads through it must be committed."""
    db = settings.DATABASES["default"]
    port = free_port()
    full_env = {
        "DATABASE_URL": f"postgresql://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "SECRET_KEY": "uvicorn-test",
        "KEY_ENCRYPTION_KEY": settings.KEY_ENCRYPTION_KEY,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "LOG_LEVEL": "WARNING",
        **env,
    }
    proc = start_uvicorn(workdir, port, full_env)
    try:
        yield port
    finally:
        proc.stop()
