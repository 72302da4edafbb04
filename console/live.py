"""Forwarding issuance.observability.publish messages to the Channels layer (docs/architecture.md, "Live
updates").

Publishing happens in whatever thread committed (a worker thread, a web request thread);
that thread only hands the message to an event loop and returns, so a slow or unreachable
Redis never slows issuance down. Which loop:

- Redis layer: a private daemon thread with its own loop (channels_redis keeps one
  connection pool per loop, so the pool is reused across messages).
- In-memory layer: the loop that serves the WebSocket consumers (attached when the first
  client connects). It is not thread-safe, so messages must be put on that loop; without
  one, nobody in this process could receive them and they are dropped.

Messages of one group keep their order (each group always goes through the same queue).

When the layer fails (Redis refused, or a Redis that accepts connections but never
answers), the sender stops trying: messages are dropped at once in the committing thread
(live updates are nudges: browsers poll while the layer is down and re-fetch when it is
back), one probe tries the layer every PROBE_EVERY seconds, and once it answers every topic
that missed a message gets one `live.resync` message, so no page keeps a stale part. One
log line when the layer fails, one when it works again.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import json
import logging
import re
import threading
import time
import zlib
from typing import Any

from channels.layers import BaseChannelLayer, InMemoryChannelLayer, get_channel_layer

from issuance.access.scope import ALL_CLUSTERS_TOPIC
from issuance.models.base import NAME_RE
from issuance.observability.publish import BULK_PREFIX, DASHBOARD

log = logging.getLogger("console.live")

CERTIFICATE_PREFIX = "certificate:"
CLUSTER_PREFIX = f"{ALL_CLUSTERS_TOPIC}:"
# A Cluster's name is a slug; a namespace a DNS label (RFC 1123), as Kubernetes requires.
_CLUSTER_NAME = re.compile(r"[-a-zA-Z0-9_]{1,63}")
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_BULK_ID = re.compile(r"[0-9a-f]{32}")
# Channels allows ASCII letters, digits, '-', '_' and '.', shorter than 100 characters.
_MAX_GROUP = 99
# A group nobody joins: the probe publishes here to learn whether the layer answers.
PROBE_GROUP = "live.probe"
RESYNC = "live.resync"

Event = dict[str, Any]


def group_for(topic: str) -> str | None:
    """The channel-layer group of a topic, or None when the topic is not a valid one."""
    if topic == DASHBOARD:
        return "live.dashboard"
    if topic.startswith(BULK_PREFIX):
        # One group per bulk action (its random id): only its progress page listens.
        action_id = topic.removeprefix(BULK_PREFIX)
        return f"live.bulk.{action_id}" if _BULK_ID.fullmatch(action_id) else None
    if topic == ALL_CLUSTERS_TOPIC:
        return "live.k8s"
    if topic.startswith(CLUSTER_PREFIX):
        return _cluster_group(topic.removeprefix(CLUSTER_PREFIX))
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


def _cluster_group(rest: str) -> str | None:
    """`<cluster>` or `<cluster>/<namespace>` → live.k8s.<cluster>[.<namespace>]: a cluster
    name has no dots, so the two never collide."""
    cluster, slash, namespace = rest.partition("/")
    if not _CLUSTER_NAME.fullmatch(cluster):
        return None
    if not slash:
        return f"live.k8s.{cluster}"
    if not _NAMESPACE.fullmatch(namespace):
        return None
    group = f"live.k8s.{cluster}.{namespace}"
    if len(group) <= _MAX_GROUP:
        return group
    # Up to 63 + 63 characters: hashed, under a prefix no cluster group can start with.
    return "live.k8sh." + hashlib.sha256(rest.encode()).hexdigest()


def layer_event(topic: str, message: dict[str, Any]) -> Event:
    """The channel-layer event for a topic's message, encoded once here, not once per
    connected browser in every consumer."""
    content = {**message, "group": topic}
    return {"type": message["type"], "group": topic, "text": json.dumps(content)}


class _Pump:
    """Sends on one event loop through a few ordered queues (group → queue by hash)."""

    WORKERS = 4

    def __init__(self, loop: asyncio.AbstractEventLoop, sender: LiveSender) -> None:
        self.loop = loop
        self.sender = sender
        self.queues: list[asyncio.Queue[tuple[str, Event]]] = []
        self.tasks: list[asyncio.Task[None]] = []
        self.probe: asyncio.Task[None] | None = None
        self.stopping = False
        loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        for _ in range(self.WORKERS):
            queue: asyncio.Queue[tuple[str, Event]] = asyncio.Queue()
            self.queues.append(queue)
            self.tasks.append(self.loop.create_task(self._run(queue)))

    def stop_own_loop(self) -> None:
        """At exit: end the private loop's tasks quietly (no "Task was destroyed" noise).
        Once: a second stop left pending would break the loop's close."""

        def stop() -> None:
            for task in [*self.tasks, *([self.probe] if self.probe else [])]:
                task.cancel()
            self.loop.call_soon(self.loop.stop)

        if not self.stopping and not self.loop.is_closed():
            self.stopping = True
            self.loop.call_soon_threadsafe(stop)

    def alive(self) -> bool:
        return not self.loop.is_closed()

    def put(self, group: str, event: Event) -> bool:
        try:
            self.loop.call_soon_threadsafe(self._put, group, event)
        except RuntimeError:  # the loop closed in between
            return False
        return True

    def _put(self, group: str, event: Event) -> None:
        index = zlib.crc32(group.encode()) % self.WORKERS
        self.queues[index].put_nowait((group, event))

    async def _run(self, queue: asyncio.Queue[tuple[str, Event]]) -> None:
        while True:
            group, event = await queue.get()
            try:
                await self._send(group, event)
            finally:
                self.resync(self.sender.done())

    def resync(self, missed: dict[str, str]) -> None:
        """Tell each topic that missed messages to re-fetch (on this loop)."""
        for group, topic in missed.items():
            self.sender.count_pending()
            self._put(group, layer_event(topic, {"type": RESYNC}))

    async def _send(self, group: str, event: Event) -> None:
        if self.sender.down:  # queued before the layer failed: no use waiting for it
            self.sender.missed(group, event["group"])
            return
        try:
            layer = get_channel_layer()
            if layer is not None:
                await asyncio.wait_for(layer.group_send(group, event), self.sender.timeout)
            self.sender.sent += 1
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.sender.missed(group, event["group"])
            if self.sender.failed(exc):
                self.probe = self.loop.create_task(self._probe_until_back())

    async def _probe_until_back(self) -> None:
        """One message every PROBE_EVERY seconds until the layer takes it; then every topic
        that missed a message is told to re-fetch."""
        while True:
            await asyncio.sleep(self.sender.PROBE_EVERY)
            layer = get_channel_layer()
            if layer is None:
                return
            if not await self._probe_once(layer):
                continue
            self.resync(self.sender.recovered())
            return

    async def _probe_once(self, layer: BaseChannelLayer) -> bool:
        try:
            await asyncio.wait_for(
                layer.group_send(PROBE_GROUP, {"type": "live.probe"}), self.sender.timeout
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # still down; the first failure was logged
            log.debug("live updates: probe failed: %r", exc)
            return False
        return True


def _run_until_stopped(loop: asyncio.AbstractEventLoop) -> None:
    loop.run_forever()
    try:
        loop.close()  # channels_redis closes its connections as its loop closes
    except Exception as exc:  # at exit, with Redis gone: nothing left to do about it
        log.debug("live publisher loop closed with %r", exc)


class LiveSender:
    """The issuance.observability.publish subscriber: `(topic, message)` → channel-layer group_send."""

    MAX_PENDING = 10_000
    # One group_send: a healthy Redis answers in well under a millisecond; a Redis that
    # takes longer than this is treated as down.
    timeout = 2.0
    # While the layer is down: how often the one probe tries it.
    PROBE_EVERY = 1.0
    # Topics remembered for the resync once the layer is back (a page per certificate).
    MAX_MISSED_TOPICS = 10_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._server_pump: _Pump | None = None
        self._own_pump: _Pump | None = None
        self.pending = 0
        self.sent = 0
        self.dropped = 0
        self.errors = 0
        self.down = False
        self._down_since = 0.0
        self._missed: dict[str, str] = {}  # group -> topic, while down
        self._backed_up = False

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
                    target=_run_until_stopped, args=(loop,), name="live-publisher", daemon=True
                )
                thread.start()
                self._own_pump = pump = _Pump(loop, self)

                def stop() -> None:
                    pump.stop_own_loop()
                    thread.join(timeout=1)

                atexit.register(stop)
            return self._own_pump

    # -- the subscriber (runs in the committing thread: never blocks, never raises) ----------
    def __call__(self, topic: str, message: dict[str, Any]) -> None:
        group = group_for(topic)
        if group is None:
            log.warning("live update for invalid topic %r dropped", topic)
            return
        layer = get_channel_layer()
        if layer is None:
            return
        if self.down:
            self.missed(group, topic)
            return
        with self._lock:
            if self.pending >= self.MAX_PENDING:
                self.dropped += 1
                self._note_missed(group, topic)
                if not self._backed_up:
                    self._backed_up = True
                    log.warning("live updates backed up (%d queued); dropping", self.pending)
                return
        pump = self._pump_for(layer)
        if pump is None:
            return
        self.count_pending()
        if not pump.put(group, layer_event(topic, message)):
            self.done()  # the loop is gone: nothing can be resynced on it either

    # -- bookkeeping (any thread) ---------------------------------------------------------------
    def count_pending(self) -> None:
        with self._lock:
            self.pending += 1

    def done(self) -> dict[str, str]:
        """One message less in flight. Returns the topics (by group) to resync when this
        ends a backlog (messages were dropped while it was full)."""
        with self._lock:
            self.pending -= 1
            if not (self._backed_up and self.pending < self.MAX_PENDING // 2) or self.down:
                return {}
            self._backed_up = False
            missed, self._missed = self._missed, {}
        log.info("live updates flowing again (%d dropped so far)", self.dropped)
        return missed

    def missed(self, group: str, topic: str) -> None:
        """A message not sent because the layer is down: counted, and its topic resynced."""
        with self._lock:
            self.dropped += 1
            self._note_missed(group, topic)

    def _note_missed(self, group: str, topic: str) -> None:
        if len(self._missed) < self.MAX_MISSED_TOPICS:
            self._missed[group] = topic

    def failed(self, exc: BaseException) -> bool:
        """A send failed; True when this is the first failure (the caller starts the probe)."""
        with self._lock:
            self.errors += 1
            if self.down:
                return False
            self.down = True
            self._down_since = time.monotonic()
        log.warning(
            "live updates paused: the channel layer does not answer (%s); dropping them until "
            "it does (browsers poll meanwhile)",
            repr(exc) if str(exc) else type(exc).__name__,
        )
        return True

    def recovered(self) -> dict[str, str]:
        """The layer answers again: returns the topics (by group) that missed messages."""
        with self._lock:
            self.down = False
            missed, self._missed = self._missed, {}
            outage = time.monotonic() - self._down_since
            dropped = self.dropped
        log.info(
            "live updates resumed: the channel layer answers again after %.0f s "
            "(%d updates dropped so far; %d topics told to re-fetch)",
            outage,
            dropped,
            len(missed),
        )
        return missed


sender = LiveSender()
