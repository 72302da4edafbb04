"""The browser's live channel: /ws/live/ (DESIGN §4, §6)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from console.live import group_for, sender
from issuance.roles import VIEWER, has_role

log = logging.getLogger("console.consumers")

# WebSocket close codes (4000–4999 are the application's): like HTTP 401 and 403.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403


class LiveConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Clients send {"subscribe": ["dashboard", "certificate:NAME"]} and then receive every
    message published for those topics, as {"group": topic, "type": ..., ...}."""

    MAX_TOPICS = 50
    MAX_FRAME = 16 * 1024

    topics: dict[str, str]

    async def connect(self) -> None:
        self.topics = {}
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(has_role)(user, VIEWER):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        # With the in-memory layer, publishers in other threads must send on this loop.
        sender.attach_server_loop(asyncio.get_running_loop())
        await self.accept()

    async def disconnect(self, code: int) -> None:
        for group in self.topics.values():
            await self.channel_layer.group_discard(group, self.channel_name)
        self.topics = {}

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        # Bad frames get an error message, not a crashed consumer.
        if text_data is None or len(text_data) > self.MAX_FRAME:
            await self._error("send JSON text frames of at most 16 KiB")
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self._error("not JSON")
            return
        await self.receive_json(content)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if not isinstance(content, dict):
            await self._error('send an object like {"subscribe": ["dashboard"]}')
        elif "subscribe" in content:
            await self._subscribe(content["subscribe"])
        elif "unsubscribe" in content:
            await self._unsubscribe(content["unsubscribe"])
        elif content.get("type") == "ping":
            await self.send_json({"type": "pong"})
        else:
            await self._error("unknown request; use subscribe, unsubscribe or ping")

    async def _subscribe(self, topics: Any) -> None:
        valid = self._topic_list(topics)
        if valid is None:
            await self._error("subscribe: a list of topics like 'dashboard', 'certificate:NAME'")
            return
        new = {t: g for t, g in valid.items() if t not in self.topics}
        if len(self.topics) + len(new) > self.MAX_TOPICS:
            await self._error(f"subscribe: at most {self.MAX_TOPICS} topics per connection")
            return
        for topic, group in new.items():
            await self.channel_layer.group_add(group, self.channel_name)
            self.topics[topic] = group
        await self.send_json({"type": "subscribed", "topics": sorted(self.topics)})

    async def _unsubscribe(self, topics: Any) -> None:
        valid = self._topic_list(topics)
        if valid is None:
            await self._error("unsubscribe: a list of topics")
            return
        for topic in valid:
            group = self.topics.pop(topic, None)
            if group:
                await self.channel_layer.group_discard(group, self.channel_name)
        await self.send_json({"type": "subscribed", "topics": sorted(self.topics)})

    @staticmethod
    def _topic_list(topics: Any) -> dict[str, str] | None:
        if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
            return None
        groups = {t: group_for(t) for t in topics}
        if any(g is None for g in groups.values()):
            return None
        return {t: g for t, g in groups.items() if g is not None}

    async def _error(self, message: str) -> None:
        await self.send_json({"type": "error", "error": message})

    # -- messages from the channel layer (type "certificate.status" → certificate_status) ----
    async def forward(self, event: dict[str, Any]) -> None:
        # A message may still arrive just after an unsubscribe; only forward what was asked.
        if event.get("group") not in self.topics:
            return
        text = event.get("text")
        if isinstance(text, str):  # pre-encoded by console.live (the normal path)
            await self.send(text_data=text)
        else:
            await self.send_json({k: v for k, v in event.items() if k != "text"})

    certificate_status = forward
    certificate_deleted = forward
    request_status = forward
    order_status = forward
    challenge_status = forward
    dashboard_changed = forward
    event_recorded = forward
