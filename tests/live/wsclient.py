"""A WebSocket test client for ASGI apps (channels.testing needs daphne, which we don't ship)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from asgiref.testing import ApplicationCommunicator


class WebsocketCommunicator:
    """A WebSocket client's side of one connection to `application`, through asgiref's
    communicator (held, not subclassed: its methods are unannotated)."""

    def __init__(self, application: Any, path: str, headers: list[tuple[bytes, bytes]]) -> None:
        scope = {
            "type": "websocket",
            "path": path,
            "query_string": b"",
            "headers": headers,
            "subprotocols": [],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8000),
        }
        self.asgi = ApplicationCommunicator(application, scope)

    async def connect(self, timeout: float = 5) -> tuple[bool, Any]:
        """(True, subprotocol) when accepted, (False, close code) when refused."""
        await self.asgi.send_input({"type": "websocket.connect"})
        response = await self.asgi.receive_output(timeout)
        if response["type"] == "websocket.close":
            return False, response.get("code", 1000)
        assert response["type"] == "websocket.accept", response
        return True, response.get("subprotocol")

    async def send_to(self, text_data: str) -> None:
        await self.asgi.send_input({"type": "websocket.receive", "text": text_data})

    async def send_json_to(self, data: Any) -> None:
        await self.send_to(json.dumps(data))

    async def receive_json_from(self, timeout: float = 5) -> dict[str, Any]:
        """The next message: the live consumer sends every one as a JSON object."""
        response = await self.asgi.receive_output(timeout)
        assert response["type"] == "websocket.send", response
        message = json.loads(response["text"])
        assert isinstance(message, dict), message
        return message

    async def receive_nothing(self, timeout: float = 0.3) -> bool:
        """True when nothing arrives within `timeout` seconds."""
        if not self.asgi.output_queue.empty():
            return False
        await asyncio.sleep(timeout)
        empty: bool = self.asgi.output_queue.empty()
        return empty

    async def disconnect(self, code: int = 1000, timeout: float = 5) -> None:
        await self.asgi.send_input({"type": "websocket.disconnect", "code": code})
        await self.asgi.wait(timeout)
