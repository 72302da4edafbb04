"""Is the channel layer carrying messages into this web process? (what the live badge says)

A WebSocket that was connected when Redis died stays open: uvicorn does not care, and the
channels_redis pub/sub layer reconnects and re-subscribes by itself when Redis is back, but
whatever was published meanwhile is lost and nothing tells the consumer. So each serving
loop with consumers runs a heartbeat: a message sent through the layer to a channel of its
own, every INTERVAL seconds (every RETRY seconds while it fails). When one does not come
back within TIMEOUT, every consumer of this process is told the layer is paused (the
browsers poll); when one comes back, they are told it resumed (the browsers re-fetch once
and stop polling). A consumer whose own call to the layer fails reports it at once.

The in-memory layer (`make run`) cannot fail and has no monitor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any, Protocol, TypedDict

from channels.layers import BaseChannelLayer, InMemoryChannelLayer

log = logging.getLogger("console.live")


class Listener(Protocol):
    async def layer_paused(self) -> None: ...

    async def layer_resumed(self) -> None: ...


class _QuietReceiveErrors(logging.Filter):
    """channels_redis logs a traceback every second while Redis is down ("Unexpected
    exception in receive task"). The first of an outage passes as one line; the monitor's
    own lines say the rest."""

    PREFIX = "Unexpected exception in receive task"

    def __init__(self) -> None:
        super().__init__()
        self.quiet = False

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(self.PREFIX):
            return True
        if self.quiet:
            return False
        self.quiet = True
        exc = record.exc_info[1] if record.exc_info else None
        record.msg = f"{self.PREFIX}: {exc!r} (repeats are not logged until it works again)"
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


receive_errors = _QuietReceiveErrors()
logging.getLogger("channels_redis.pubsub").addFilter(receive_errors)


class LayerMonitor:
    """One per serving loop: heartbeats through the layer while consumers are connected."""

    INTERVAL = 2.0  # between heartbeats while the layer works
    RETRY = 1.0  # between attempts while it does not
    TIMEOUT = 3.0  # a heartbeat not back by then: the layer is down
    RESEND = 0.5

    def __init__(self, layer: BaseChannelLayer) -> None:
        self.layer = layer
        self.loop = asyncio.get_running_loop()
        self.available = True
        self.last_error = ""
        self._listeners: set[Listener] = set()
        self._someone = asyncio.Event()
        self._check_now = asyncio.Event()
        self._channel: str | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._sent = 0
        self._seen = 0
        self._arrived = asyncio.Event()
        self._task = self.loop.create_task(self._run())

    # -- consumers ------------------------------------------------------------------------
    def add(self, listener: Listener) -> None:
        self._listeners.add(listener)
        self._someone.set()

    async def discard(self, listener: Listener) -> None:
        self._listeners.discard(listener)
        if not self._listeners:
            self._someone.clear()
            await self._stop_receiving()

    async def _stop_receiving(self) -> None:
        """Nobody is connected: no heartbeats, and the heartbeat channel is let go (while the
        loop runs: a Redis layer cleans up its subscription as its receive is cancelled)."""
        receiver, self._receiver, self._channel = self._receiver, None, None
        if receiver is not None and not receiver.done():
            receiver.cancel()
            await asyncio.wait([receiver], timeout=self.TIMEOUT)

    async def report_failure(self, exc: BaseException) -> None:
        """A consumer's call to the layer failed: pause now, and look again soon."""
        if self.available:
            await self._announce(False, _describe(exc))
        self._check_now.set()

    # -- the heartbeat --------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            await self._someone.wait()
            error = await self._beat()
            if not self._listeners:
                continue  # the last one left during the beat: nobody to tell
            if (error is None) != self.available:
                await self._announce(error is None, error or "")
            await self._pause(self.INTERVAL if self.available else self.RETRY)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._check_now.wait(), seconds)
        self._check_now.clear()

    async def _beat(self) -> str | None:
        """None when a heartbeat went through the layer and back; else what went wrong.

        Re-sent every RESEND seconds within TIMEOUT: just after Redis returns, a heartbeat
        may be published before this process has subscribed again, and is lost."""
        before = self._sent
        try:
            async with asyncio.timeout(self.TIMEOUT):
                if self._channel is None:
                    self._channel = await self.layer.new_channel("live.heartbeat.")
                if self._receiver is None or self._receiver.done():
                    self._receiver = self.loop.create_task(self._receive(self._channel))
                while self._seen <= before:
                    self._sent += 1
                    await self.layer.send(
                        self._channel, {"type": "live.heartbeat", "n": self._sent}
                    )
                    self._arrived.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._arrived.wait(), self.RESEND)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            return f"no heartbeat through the channel layer within {self.TIMEOUT:.0f} s"
        except Exception as exc:
            return _describe(exc)
        return None

    async def _receive(self, channel: str) -> None:
        while True:
            try:
                message = await self.layer.receive(channel)
            except asyncio.CancelledError:
                raise
            except Exception:  # the list-based layer raises while Redis is down
                await asyncio.sleep(self.RETRY)
                continue
            n = message.get("n")
            if isinstance(n, int) and n > self._seen:
                self._seen = n
                self._arrived.set()

    async def _announce(self, available: bool, error: str) -> None:
        self.available = available
        self.last_error = error
        if available:
            receive_errors.quiet = False
            log.info("live updates to browsers resumed: the channel layer works again")
        else:
            log.warning(
                "live updates to browsers paused (%s); browsers poll until it works again",
                error,
            )
        listeners = list(self._listeners)
        calls = [(x.layer_resumed() if available else x.layer_paused()) for x in listeners]
        for result in await asyncio.gather(*calls, return_exceptions=True):
            if isinstance(result, Exception):
                log.warning("live: telling a browser the layer state failed: %r", result)


def _describe(exc: BaseException) -> str:
    return repr(exc) if str(exc) else type(exc).__name__


_monitors: dict[asyncio.AbstractEventLoop, LayerMonitor] = {}


def monitor_for(layer: Any) -> LayerMonitor | None:
    """The running loop's monitor of `layer` (None for the in-memory layer)."""
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return None
    loop = asyncio.get_running_loop()
    for old in [lp for lp in _monitors if lp.is_closed()]:
        del _monitors[old]
    monitor = _monitors.get(loop)
    if monitor is None or monitor.layer is not layer:
        if monitor is not None:
            monitor._task.cancel()
        monitor = _monitors[loop] = LayerMonitor(layer)
    return monitor


class LayerState(TypedDict):
    """The channel layer as /readyz reports it (console.probes): informative, never fatal."""

    backend: str  # "in-memory" or the layer's class name
    # "working" / "paused": what the heartbeat of this process's live connections last saw;
    # "not monitored": no browser is connected, so nothing has been sent through it lately.
    state: str
    error: str


def layer_state(layer: Any) -> LayerState:
    """What this process knows of `layer`, without sending anything (a probe must answer
    at once, and Redis' timeout is longer than a probe's)."""
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return {"backend": "in-memory", "state": "working", "error": ""}
    monitors = [m for loop, m in list(_monitors.items()) if not loop.is_closed()]
    watched = [m for m in monitors if m.layer is layer and m._listeners]
    backend = type(layer).__name__
    if not watched:
        return {"backend": backend, "state": "not monitored", "error": ""}
    paused = [m for m in watched if not m.available]
    if paused:
        return {"backend": backend, "state": "paused", "error": paused[0].last_error}
    return {"backend": backend, "state": "working", "error": ""}
