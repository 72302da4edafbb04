"""Forwarding issuance.publish messages to the Channels layer (DESIGN §4).

Publishing happens in whatever thread committed (a worker thread, a web request thread);
that thread only hands the message to an event loop and returns, so a slow or unreachable
Redis never slows issuance down. Which loop:

- Redis layer: a private daemon thread with its own loop (channels_redis keeps one
  connection pool per loop, so the pool is reused across messages).
- In-memory layer: the loop that serves the WebSocket consumers (attached when the first
  client connects). It is not thread-safe, so messages must be put on that loop; without
  one, nobody in this process could receive them and they are dropped.

Messages of one group keep their order (each group always goes through the same queue).
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import logging
import threading
import time
import zlib
from typing import Any

from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer

from issuance.models.base import NAME_RE
from issuance.publish import DASHBOARD

log = logging.getLogger("console.live")

CERTIFICATE_PREFIX = "certificate:"
# Channels allows ASCII letters, digits, '-', '_' and '.', shorter than 100 characters.
_MAX_GROUP = 99


def group_for(topic: str) -> str | None:
    """The channel-layer group of a topic, or None when the topic is not a valid one."""
    if topic == DASHBOARD:
        return "live.dashboard"
    if topic.startswith(CERTIFICATE_PREFIX):
        name = topic.removeprefix(CERTIFICATE_PREFIX)
        if not NAME_RE.match(name):
            return None
        group = f"live.cert.{name}"
        if len(group) <= _MAX_GROUP:
            return group
        # Resource names may be 253 characters; a distinct prefix keeps hashes from
        # colliding with a certificate that happens to be named like one.
        return "live.certh." + hashlib.sha256(name.encode()).hexdigest()
    return None


class _Pump:
    """Sends on one event loop through a few ordered queues (group → queue by hash)."""

    WORKERS = 4

    def __init__(self, loop: asyncio.AbstractEventLoop, sender: LiveSender) -> None:
        self.loop = loop
        self.sender = sender
        self.queues: list[asyncio.Queue[tuple[str, dict[str, Any]]]] = []
        self.tasks: list[asyncio.Task[None]] = []
        loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        for _ in range(self.WORKERS):
            queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
            self.queues.append(queue)
            self.tasks.append(self.loop.create_task(self._run(queue)))

    def stop_own_loop(self) -> None:
        """At exit: end the private loop's tasks quietly (no "Task was destroyed" noise)."""

        def stop() -> None:
            for task in self.tasks:
                task.cancel()
            self.loop.call_soon(self.loop.stop)

        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(stop)

    def alive(self) -> bool:
        return not self.loop.is_closed()

    def put(self, group: str, message: dict[str, Any]) -> bool:
        try:
            self.loop.call_soon_threadsafe(self._put, group, message)
        except RuntimeError:  # the loop closed in between
            return False
        return True

    def _put(self, group: str, message: dict[str, Any]) -> None:
        index = zlib.crc32(group.encode()) % self.WORKERS
        self.queues[index].put_nowait((group, message))

    async def _run(self, queue: asyncio.Queue[tuple[str, dict[str, Any]]]) -> None:
        while True:
            group, message = await queue.get()
            try:
                layer = get_channel_layer()
                if layer is not None:
                    await asyncio.wait_for(layer.group_send(group, message), self.sender.timeout)
                self.sender.sent += 1
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.sender.failed(group, exc)
            finally:
                self.sender.done()


class LiveSender:
    """The issuance.publish subscriber: `(topic, message)` → channel-layer group_send."""

    MAX_PENDING = 10_000
    timeout = 5.0
    LOG_EVERY = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server_pump: _Pump | None = None
        self._own_pump: _Pump | None = None
        self.pending = 0
        self.sent = 0
        self.dropped = 0
        self.errors = 0
        self._last_log = 0.0

    # -- loops ------------------------------------------------------------------------------
    def attach_server_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called by the consumer on connect: the loop that receives in-memory messages."""
        with self._lock:
            if self._server_pump is None or self._server_pump.loop is not loop:
                self._server_pump = _Pump(loop, self)

    def _pump_for(self, layer: BaseChannelLayer) -> _Pump | None:
        with self._lock:
            if isinstance(layer, InMemoryChannelLayer):
                pump = self._server_pump
                return pump if pump is not None and pump.alive() else None
            if self._own_pump is None or not self._own_pump.alive():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="live-publisher", daemon=True
                )
                thread.start()
                self._own_pump = pump = _Pump(loop, self)

                def stop() -> None:
                    pump.stop_own_loop()
                    thread.join(timeout=1)

                atexit.register(stop)
            return self._own_pump

    # -- the subscriber -----------------------------------------------------------------------
    def __call__(self, topic: str, message: dict[str, Any]) -> None:
        group = group_for(topic)
        if group is None:
            log.warning("live update for invalid topic %r dropped", topic)
            return
        layer = get_channel_layer()
        if layer is None:
            return
        with self._lock:
            if self.pending >= self.MAX_PENDING:
                self.dropped += 1
                self._log_limited("live updates backed up; dropped %d so far", self.dropped)
                return
        pump = self._pump_for(layer)
        if pump is None:
            return
        with self._lock:
            self.pending += 1
        # Encoded once here, not once per connected browser in every consumer.
        content = {**message, "group": topic}
        event = {"type": message["type"], "group": topic, "text": json.dumps(content)}
        if not pump.put(group, event):
            self.done()

    def done(self) -> None:
        with self._lock:
            self.pending -= 1

    def failed(self, group: str, exc: BaseException) -> None:
        with self._lock:
            self.errors += 1
            errors = self.errors
        # Redis down means every message fails; one line a minute is enough.
        self._log_limited("live update to %s failed (%d failures so far): %r", group, errors, exc)

    def _log_limited(self, msg: str, *args: Any) -> None:
        now = time.monotonic()
        if now - self._last_log >= self.LOG_EVERY:
            self._last_log = now
            log.warning(msg, *args)


sender = LiveSender()
