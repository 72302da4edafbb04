"""The browser's live channel: /ws/live/ (docs/architecture.md, "Live updates").

Protocol (JSON text frames):

- client → server: {"subscribe": [topics]}, {"unsubscribe": [topics]}, {"type": "ping"}
- Topics of the console's own resources: "dashboard", "certificate:NAME", "bulk:ID" (a
  bulk action's progress, for the user who started it and admins only). Unscoped users
  with the viewer role only.
- Topics of mirrored cert-manager objects (issuance/access/scope.py): "k8s" (every
  cluster: unscoped users only), "k8s:CLUSTER" and "k8s:CLUSTER/NAMESPACE" (users whose
  scope covers it and who hold the viewer role there).
- server → client: {"type": "subscribed", "topics": [...]}, {"type": "pong"},
  {"type": "error", "error": "...", "topic": "..."} (a refused topic: the others of the
  same request are still subscribed and confirmed by "subscribed"; a request whose every
  new topic is refused gets errors only), and every message published for a subscribed
  topic ({"group": topic, "type": "certificate.status", ...}; {"type": "live.resync"}
  means "something was missed: re-fetch").
- Mirrored objects: {"type": "mirror.changed", "kind", "cluster", "namespace", "name",
  "ready", "reason", "next_retry_at", "renewal_time", "deleted", ...}, {"type":
  "mirror.event", ...} (a Kubernetes Event), {"type": "mirror.many", "changed",
  "deleted", "events", "kinds"} (one transaction changed many objects: re-fetch), and
  {"type": "cluster.status", "cluster", "state", "deleted"} on "k8s" and "k8s:CLUSTER".
- {"type": "paused"}: the channel layer (Redis) is unavailable, so nothing will be pushed;
  the socket stays open. {"type": "resumed"}: it works again and the subscriptions are
  back; whatever happened in between was not pushed, so re-fetch once.
- Close codes: 4401 (not signed in), 4403 (no viewer role anywhere): retrying cannot help.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch

from console import live, signin_steps
from console.live import group_for, sender
from console.livehealth import LayerMonitor, monitor_for
from issuance.access import scope as cluster_scope
from issuance.access.roles import VIEWER, granted_roles, has_role
from issuance.observability.publish import BULK_PREFIX
from issuance.operations.bulk import may_watch

log = logging.getLogger("console.consumers")

# WebSocket close codes (4000–4999 are the application's): like HTTP 401 and 403.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
PAUSED = {"type": "paused"}
RESUMED = {"type": "resumed"}


class LiveConsumer(AsyncJsonWebsocketConsumer):  # type: ignore[misc]
    """Clients send {"subscribe": ["dashboard", "certificate:NAME"]} and then receive every
    message published for those topics, as {"group": topic, "type": ..., ...}."""

    MAX_TOPICS = 50
    MAX_FRAME = 16 * 1024
    # One call to the channel layer; a healthy Redis answers in well under a millisecond.
    LAYER_TIMEOUT = 3.0

    topics: dict[str, str]  # what the client asked for: topic -> group
    joined: set[str]  # groups this consumer's channel is in on the layer
    monitor: LayerMonitor | None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """AsyncConsumer.__call__, except that the layer channel is made after the socket is
        accepted, with a timeout: with Redis down the socket still opens and says so, rather
        than failing (refused) or hanging (a Redis that never answers) in the handshake."""
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        self.channel_name = ""
        self.base_send = send
        self.topics = {}
        self.joined = set()
        self.monitor = None
        self._ready = asyncio.Event()
        self._told_paused = False
        try:
            await await_many_dispatch([receive, self._from_layer], self.dispatch)
        except StopConsumer:
            pass
        finally:
            if self.monitor is not None:
                await self.monitor.discard(self)

    async def _from_layer(self) -> dict[str, Any]:
        while True:
            await self._ready.wait()
            try:
                message: dict[str, Any] = await self.channel_layer.receive(self.channel_name)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the list-based Redis layer raises while Redis is down
                await self._layer_failed(exc)
                await asyncio.sleep(1.0)
                continue
            return message

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        # A sign-in still owing its second factor or a password change (console.signin_steps)
        # is not signed in yet for live updates either.
        if await database_sync_to_async(signin_steps.pending)(self.scope.get("session")):
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        # A scoped viewer holds no console-wide role, yet may watch the clusters and
        # namespaces of their scope: each topic is checked when subscribed.
        if VIEWER not in await database_sync_to_async(granted_roles)(user):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        # With the in-memory layer, publishers in other threads must send on this loop.
        sender.attach_server_loop(asyncio.get_running_loop())
        await self.accept()
        self.monitor = monitor_for(self.channel_layer)
        if self.monitor is not None:
            self.monitor.add(self)
        await self._open_channel()

    async def disconnect(self, code: int) -> None:
        if self.monitor is not None:
            await self.monitor.discard(self)
        for group in list(self.joined):
            if not await self._layer_call(self.channel_layer.group_discard, group, report=False):
                break  # the layer is down: don't wait once per group
        self.joined.clear()
        self.topics = {}

    # -- the channel layer, which may be down ---------------------------------------------
    def _layer_down(self) -> bool:
        return self.monitor is not None and not self.monitor.available

    async def _layer_call(self, method: Any, group: str, *, report: bool = True) -> bool:
        """group_add/group_discard with a timeout; False (and the layer reported) on failure."""
        try:
            await asyncio.wait_for(method(group, self.channel_name), self.LAYER_TIMEOUT)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if report:
                await self._layer_failed(exc)
            return False
        return True

    async def _open_channel(self) -> bool:
        """The layer channel this consumer receives on; False while the layer is down."""
        if self._ready.is_set():
            return True
        if self._layer_down():
            await self.layer_paused()
            return False
        try:
            self.channel_name = await asyncio.wait_for(
                self.channel_layer.new_channel(), self.LAYER_TIMEOUT
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._layer_failed(exc)
            return False
        self._ready.set()
        return True

    async def _join(self) -> bool:
        """Put the channel in every wanted group; False while the layer is down."""
        if not await self._open_channel():
            return False
        for group in set(self.topics.values()) - self.joined:
            if self._layer_down() or not await self._layer_call(
                self.channel_layer.group_add, group
            ):
                await self.layer_paused()
                return False
            self.joined.add(group)
        return True

    async def _layer_failed(self, exc: BaseException) -> None:
        if self.monitor is not None:
            await self.monitor.report_failure(exc)  # tells every consumer, this one too
        else:
            log.warning("live: channel layer call failed: %r", exc)
        await self.layer_paused()

    # -- told by the monitor ------------------------------------------------------------------
    async def layer_paused(self) -> None:
        if not self._told_paused:
            self._told_paused = True
            await self.send_json(PAUSED)

    async def layer_resumed(self) -> None:
        if await self._join() and self._told_paused:
            self._told_paused = False
            await self.send_json(RESUMED)

    # -- frames from the client ---------------------------------------------------------------
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
        wanted = {t: g for t, g in valid.items() if t not in self.topics}
        refused = await database_sync_to_async(_refused)(self.scope.get("user"), list(wanted))
        for topic in refused:
            await self._error(f"subscribe: {topic} is not yours to watch", topic=topic)
        new = {t: g for t, g in wanted.items() if t not in refused}
        if refused and not new:
            return
        if len(self.topics) + len(new) > self.MAX_TOPICS:
            await self._error(f"subscribe: at most {self.MAX_TOPICS} topics per connection")
            return
        # Wanted even while the layer is down: joined when it is back.
        self.topics.update(new)
        await self._join()
        await self.send_json({"type": "subscribed", "topics": sorted(self.topics)})

    async def _unsubscribe(self, topics: Any) -> None:
        valid = self._topic_list(topics)
        if valid is None:
            await self._error("unsubscribe: a list of topics")
            return
        for topic in valid:
            group = self.topics.pop(topic, None)
            if group and group in self.joined and group not in self.topics.values():
                self.joined.discard(group)
                await self._layer_call(self.channel_layer.group_discard, group, report=False)
        await self.send_json({"type": "subscribed", "topics": sorted(self.topics)})

    @staticmethod
    def _topic_list(topics: Any) -> dict[str, str] | None:
        if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
            return None
        groups = {t: group_for(t) for t in topics}
        if any(g is None for g in groups.values()):
            return None
        return {t: g for t, g in groups.items() if g is not None}

    async def _error(self, message: str, *, topic: str = "") -> None:
        await self.send_json(
            {"type": "error", "error": message, **({"topic": topic} if topic else {})}
        )

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
    live_resync = forward
    bulk_progress = forward
    mirror_changed = forward
    mirror_event = forward
    mirror_many = forward
    cluster_status = forward


def _refused(user: Any, topics: list[str]) -> list[str]:
    """The topics `user` may not watch, in the order asked (one thread, cached roles and
    scope: a few queries per connection, not per topic)."""
    return [topic for topic in topics if not _may_watch(user, topic)]


def _may_watch(user: Any, topic: str) -> bool:
    if topic == cluster_scope.ALL_CLUSTERS_TOPIC or topic.startswith(live.CLUSTER_PREFIX):
        # Mirrored objects: the viewer role wherever granted, and a scope that covers the
        # topic ("k8s", every cluster, for unscoped users only).
        return VIEWER in granted_roles(user) and cluster_scope.may_subscribe(user, topic)
    # The console's own resources: unscoped viewers (a scoped user holds no such role).
    if not has_role(user, VIEWER):
        return False
    if topic.startswith(BULK_PREFIX):
        return may_watch(user, topic.removeprefix(BULK_PREFIX))
    return True
