"""A bulk action's progress reaches its page over /ws/live/ (topic bulk:<id>), one message per
committed chunk, and only the user who started it may subscribe."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import User

from console import live
from issuance.models import BulkAction
from issuance.operations import bulk
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.helpers import wait_for
from tests.live.conftest import run, session_cookie, subscribed

pytestmark = pytest.mark.django_db(transaction=True)


def test_progress_messages_after_each_chunk(
    make_user: Callable[..., User], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bulk, "CHUNK", 2)
    operator = make_user("op-ws", "operator")
    other = make_user("other-ws", "operator")
    issuer = make_selfsigned_issuer()
    names = [f"b{i}" for i in range(5)]
    for name in names:
        make_certificate(name, issuer)
    action = bulk.create("renew", names, "op-ws")
    topic = f"bulk:{action.id.hex}"
    wait_for(lambda: live.sender.pending == 0, 5, "the sender's queue drained")

    async def main() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        cookie = await database_sync_to_async(session_cookie)(operator)
        comm = await subscribed(cookie, topic)
        got = []
        for _ in range(3):
            await database_sync_to_async(bulk.run_chunk)(action.id)
            got.append(await comm.receive_json_from(timeout=5))
        # Someone else's action: refused, nothing joined.
        other_cookie = await database_sync_to_async(session_cookie)(other)
        intruder = await subscribed(other_cookie, "dashboard")
        await intruder.send_json_to({"subscribe": [topic]})
        refused = await intruder.receive_json_from(timeout=5)
        await comm.disconnect()
        await intruder.disconnect()
        return got, refused

    got, refused = run(main())
    assert [m["type"] for m in got] == ["bulk.progress"] * 3
    assert {m["group"] for m in got} == {topic}
    assert [(m["done"], m["total"], m["finished"]) for m in got] == [
        (2, 5, False),
        (4, 5, False),
        (5, 5, True),
    ]
    assert refused["type"] == "error" and "not yours" in refused["error"]
    assert BulkAction.objects.get().finished_at is not None
