"""WebSocket clients against the real ASGI application (console.asgi), with a session cookie."""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from channels.layers import channel_layers, get_channel_layer
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from pytest_django import Settings

from console.asgi import application
from tests.live.outage import App, RedisServer, start_redis, start_serve
from tests.live.wsclient import WebsocketCommunicator

REDIS_URL = os.environ.get("TEST_REDIS_URL") or "redis://127.0.0.1:6379/5"


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def session_cookie(user: User) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def communicator(
    cookie: str | None = None, origin: str | None = "http://127.0.0.1"
) -> WebsocketCommunicator:
    headers = []
    if origin:
        headers.append((b"origin", origin.encode()))
    if cookie:
        headers.append((b"cookie", f"{settings.SESSION_COOKIE_NAME}={cookie}".encode()))
    return WebsocketCommunicator(application, "/ws/live/", headers=headers)


async def subscribed(cookie: str, *topics: str) -> WebsocketCommunicator:
    comm = communicator(cookie)
    connected, code = await comm.connect(timeout=5)
    assert connected, code
    await comm.send_json_to({"subscribe": list(topics)})
    reply = await comm.receive_json_from(timeout=5)
    assert reply == {"type": "subscribed", "topics": sorted(topics)}
    return comm


@pytest.fixture(autouse=True)
def fresh_layers() -> Iterator[None]:
    """Each test gets new channel layers (the in-memory one keeps groups between loops)."""
    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(
    params=[
        "channels_redis.pubsub.RedisPubSubChannelLayer",
        "channels_redis.core.RedisChannelLayer",
    ],
    ids=["pubsub", "core"],
)
def redis_layer(request: pytest.FixtureRequest, settings: Settings) -> Iterator[str]:
    """A real Redis channel layer (the pub/sub one settings use, and the list-based one)
    under a prefix of our own, flushed afterwards."""
    prefix = f"test-live-{uuid.uuid4().hex[:12]}"
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": request.param,
            "CONFIG": {"hosts": [REDIS_URL], "prefix": prefix},
        }
    }
    channel_layers.backends.clear()
    yield prefix
    # A fresh layer object: the used one holds connections bound to the test's closed loops.
    channel_layers.backends.clear()

    async def flush() -> None:
        layer = get_channel_layer()
        await layer.flush()

    run(flush())
    channel_layers.backends.clear()


@pytest.fixture
def viewer_cookie(make_user: Callable[..., User]) -> str:
    return session_cookie(make_user("viewer-ws", "viewer"))


def server_database_url() -> str:
    """This run's test database as a DATABASE_URL for a server process (PostgreSQL, or a
    file SQLite database)."""
    from django.db import connection

    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = quote(str(db.get("USER") or ""))
    password = db.get("PASSWORD") or ""
    auth = f"{user}:{quote(str(password))}@" if password else (f"{user}@" if user else "")
    host = db.get("HOST") or "127.0.0.1"
    return f"postgresql://{auth}{host}:{db.get('PORT') or 5432}/{db['NAME']}"


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own on a free port (never the shared one)."""
    server = start_redis(tmp_path / "redis")
    yield server
    server.stop()


@pytest.fixture
def serve_with_redis(
    transactional_db: None, private_redis: RedisServer, tmp_path: Path
) -> Iterator[Callable[[], App]]:
    """Starts `manage.py serve` (web + worker) on the test database with REDIS_URL pointing at
    the private redis-server; stopped before the database is flushed."""
    apps: list[App] = []

    def start() -> App:
        env = {
            "DATABASE_URL": server_database_url(),
            "SECRET_KEY": settings.SECRET_KEY,
            "KEY_ENCRYPTION_KEY": settings.KEY_ENCRYPTION_KEY,
            "REDIS_URL": private_redis.url,
        }
        app = start_serve(tmp_path / "serve", env)
        apps.append(app)
        return app

    yield start
    for app in apps:
        app.stop()
