"""/ws/live/: who may connect, scoped groups, messages only after commit (in-memory and Redis)."""

from __future__ import annotations

import time
from base64 import b32encode
from collections.abc import Callable
from typing import Any

import pyotp
import pytest
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.test import Client

from console import live
from issuance.models import Certificate, TOTPFactor
from issuance.observability import events
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.helpers import wait_for
from tests.live.conftest import communicator, run, session_cookie, subscribed

pytestmark = pytest.mark.django_db(transaction=True)


def test_anonymous_is_refused_before_accept() -> None:
    async def main() -> tuple[bool, Any]:
        comm = communicator(cookie=None)
        result = await comm.connect(timeout=5)
        await comm.disconnect()
        return result

    assert run(main()) == (False, 4401)


def test_user_without_role_is_refused(make_user: Callable[..., User]) -> None:
    cookie = session_cookie(make_user("norole"))

    async def main() -> tuple[bool, Any]:
        comm = communicator(cookie)
        result = await comm.connect(timeout=5)
        await comm.disconnect()
        return result

    assert run(main()) == (False, 4403)


def test_foreign_origin_is_refused(viewer_cookie: str) -> None:
    async def main() -> bool:
        comm = communicator(viewer_cookie, origin="https://evil.example")
        connected, _ = await comm.connect(timeout=5)
        await comm.disconnect()
        return connected

    assert run(main()) is False


def test_viewer_subscribes_and_bad_requests_get_errors(viewer_cookie: str) -> None:
    async def main() -> list[dict[str, Any]]:
        comm = await subscribed(viewer_cookie, "dashboard")
        replies = []
        for frame in (
            '{"subscribe": ["certificate:Bad Name"]}',
            '{"subscribe": "dashboard"}',
            "not json",
            "[1, 2]",
            '{"type": "ping"}',
            '{"subscribe": ["certificate:web", "dashboard"]}',
            '{"unsubscribe": ["dashboard"]}',
        ):
            await comm.send_to(text_data=frame)
            replies.append(await comm.receive_json_from(timeout=5))
        await comm.disconnect()
        return replies

    replies = run(main())
    assert [r["type"] for r in replies[:4]] == ["error"] * 4
    assert "topics" in replies[0]["error"]
    assert replies[4] == {"type": "pong"}
    assert replies[5] == {"type": "subscribed", "topics": ["certificate:web", "dashboard"]}
    assert replies[6] == {"type": "subscribed", "topics": ["certificate:web"]}


def test_too_many_topics_refused(viewer_cookie: str) -> None:
    async def main() -> dict[str, Any]:
        comm = await subscribed(viewer_cookie, "dashboard")
        await comm.send_json_to({"subscribe": [f"certificate:c{i}" for i in range(60)]})
        reply = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return reply

    assert run(main())["type"] == "error"


def _save_cert(name: str, revision: int) -> None:
    with transaction.atomic():
        cert = Certificate.objects.get(name=name)
        cert.revision = revision
        cert.save()


def _scoped_delivery() -> None:
    issuer = make_selfsigned_issuer()
    make_certificate("alpha", issuer)
    make_certificate("beta", issuer)
    # The creations' own messages leave through the background sender: let them go before
    # subscribing, or one could arrive after and be taken for the update under test.
    wait_for(lambda: live.sender.pending == 0, 5, "the sender's queue drained")

    async def main() -> tuple[dict[str, Any], bool, bool, dict[str, Any]]:
        viewer = await database_sync_to_async(User.objects.get)(username="viewer-ws")
        cookie = await database_sync_to_async(session_cookie)(viewer)
        comm_a = await subscribed(cookie, "certificate:alpha")
        comm_b = await subscribed(cookie, "certificate:beta")
        await database_sync_to_async(_save_cert)("alpha", 7)
        got_a = await comm_a.receive_json_from(timeout=5)
        b_silent = await comm_b.receive_nothing(timeout=0.5)
        a_silent = await comm_a.receive_nothing(timeout=0.2)
        await database_sync_to_async(_save_cert)("beta", 3)
        got_b = await comm_b.receive_json_from(timeout=5)
        await comm_a.disconnect()
        await comm_b.disconnect()
        return got_a, b_silent, a_silent, got_b

    got_a, b_silent, a_silent, got_b = run(main())
    assert got_a["type"] == "certificate.status"
    assert got_a["group"] == "certificate:alpha"
    assert (got_a["name"], got_a["revision"]) == ("alpha", 7)
    assert "at" in got_a
    assert b_silent, "beta's subscriber got alpha's message"
    assert a_silent, "more than one message for one save"
    assert (got_b["group"], got_b["name"], got_b["revision"]) == ("certificate:beta", "beta", 3)


def _rollback_sends_nothing() -> None:
    issuer = make_selfsigned_issuer()
    make_certificate("gamma", issuer)
    wait_for(lambda: live.sender.pending == 0, 5, "the sender's queue drained")

    class Boom(Exception):
        pass

    def change_then_fail() -> None:
        try:
            with transaction.atomic():
                cert = Certificate.objects.get(name="gamma")
                cert.revision = 99
                cert.save()
                raise Boom
        except Boom:
            pass

    async def main() -> tuple[bool, dict[str, Any]]:
        viewer = await database_sync_to_async(User.objects.get)(username="viewer-ws")
        cookie = await database_sync_to_async(session_cookie)(viewer)
        comm = await subscribed(cookie, "dashboard", "certificate:gamma")
        await database_sync_to_async(change_then_fail)()
        silent = await comm.receive_nothing(timeout=0.5)
        # The same connection still gets a committed change: the silence above was real.
        await database_sync_to_async(_save_cert)("gamma", 5)
        got = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return silent, got

    silent, got = run(main())
    assert silent, "a rolled-back save was published"
    assert got["revision"] == 5
    assert Certificate.objects.get(name="gamma").revision == 5


def test_messages_reach_only_their_group(make_user: Callable[..., User]) -> None:
    make_user("viewer-ws", "viewer")
    _scoped_delivery()


def test_rolled_back_transaction_publishes_nothing(make_user: Callable[..., User]) -> None:
    make_user("viewer-ws", "viewer")
    _rollback_sends_nothing()


@pytest.mark.redis
def test_redis_layer_scoped_delivery(redis_layer: str, make_user: Callable[..., User]) -> None:
    make_user("viewer-ws", "viewer")
    _scoped_delivery()


@pytest.mark.redis
def test_redis_layer_rollback(redis_layer: str, make_user: Callable[..., User]) -> None:
    make_user("viewer-ws", "viewer")
    _rollback_sends_nothing()


def test_event_reaches_certificate_page(viewer_cookie: str) -> None:
    def record() -> None:
        with transaction.atomic():
            events.record(
                "Certificate",
                "delta",
                "Issuing",
                "renewal time reached",
                certificate_name="delta",
                actor="alice",
            )

    async def main() -> dict[str, Any]:
        comm = await subscribed(viewer_cookie, "certificate:delta")
        await database_sync_to_async(record)()
        got = await comm.receive_json_from(timeout=5)
        await comm.disconnect()
        return got

    got = run(main())
    assert got["type"] == "event.recorded"
    assert got["group"] == "certificate:delta"
    assert (got["reason"], got["actor"]) == ("Issuing", "alice")


def test_a_sign_in_owing_its_second_factor_is_refused(make_user: Callable[..., User]) -> None:
    """Password given, code not yet (console.signin_steps): not signed in for live updates."""
    user = make_user("half", "viewer")
    device = TOTPFactor.objects.create(user=user, name="app", confirmed=True)
    client = Client(REMOTE_ADDR="192.0.2.50")
    assert client.post("/login/", {"username": "half", "password": "pw-half"}).status_code == 302
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value

    async def connect() -> tuple[bool, Any]:
        comm = communicator(cookie)
        result = await comm.connect(timeout=5)
        await comm.disconnect()
        return result

    assert run(connect()) == (False, 4401)
    code = pyotp.TOTP(b32encode(device.bin_key).decode()).at(time.time())
    assert client.post("/login/verify/", {"code": code})["Location"] == "/"
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    assert run(connect())[0] is True
