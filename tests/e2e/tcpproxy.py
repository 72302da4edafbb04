"""A plain TCP forwarder that can go down and come back on the same port.

For "the CA refuses connections" without losing the CA's state: Pebble keeps its accounts
and orders in memory, so a killed Pebble comes back knowing nothing. Put this in front
of it (TLS passes through untouched; Pebble builds its URLs from the Host header, so
they point at the proxy), then `down()`: the port is closed (new connections are
refused) and open connections are cut; `up()` listens on the same port again.

    proxy = TcpProxy(("127.0.0.1", pebble.port))
    directory = f"https://127.0.0.1:{proxy.port}/dir"
    proxy.down(); ...; proxy.up(); proxy.stop()

`hold()` is the other way a peer goes quiet: connections are accepted and then nothing is
forwarded or answered (as a black-holed route); `release()` forwards new connections again,
while the held ones stay hung until `stop()`.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    def __init__(self, target: tuple[str, int], host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = target
        self.host = host
        self.port = port
        self.connections = 0  # accepted while up
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self.holding = False
        self.held: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.up()

    @property
    def is_up(self) -> bool:
        return self._listener is not None

    def up(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, self.port))
        listener.listen(512)
        self.port = int(listener.getsockname()[1])
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._thread.start()

    def down(self) -> None:
        """Close the port (connections are refused) and cut every open connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        if self._thread is not None:
            self._thread.join(5)
        with self._lock:
            conns = list(self._open)
            self._open.clear()
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()

    def hold(self) -> None:
        self.holding = True

    def release(self) -> None:
        self.holding = False

    def stop(self) -> None:
        self.down()
        with self._lock:
            held, self.held = self.held, []
        for conn in held:
            conn.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # closed by down()
            if self.holding:
                with self._lock:
                    self.held.append(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self.connections += 1
                self._open.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                dst.shutdown(socket.SHUT_WR)
            with self._lock:
                done = src in self._open and dst not in self._open
                self._open.discard(src)
            if done:
                src.close()
                dst.close()
