"""Real servers for the probe tests, on free loopback ports: a TLS server (Python `ssl`)
serving a given chain and key, an SMTP server with STARTTLS (aiosmtpd), a closed port and a
black hole (a listening socket whose backlog is full, so connects hang unanswered)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from aiosmtpd.controller import Controller


def _context(chain_pem: str, key_pem: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as tmp:
        cert_file, key_file = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert_file.write_text(chain_pem)
        key_file.write_text(key_pem)
        context.load_cert_chain(cert_file, key_file)
    return context


@contextlib.contextmanager
def _serving(handle: Callable[[socket.socket], None]) -> Iterator[int]:
    """A listener on 127.0.0.1 whose thread hands each connection to `handle` (which must
    close it); yields the port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(5)
            handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


@contextlib.contextmanager
def tls_server(chain_pem: str, key_pem: str) -> Iterator[int]:
    """Serve the chain with the key on 127.0.0.1; yields the port. Each connection gets a
    handshake, then is closed."""
    context = _context(chain_pem, key_pem)

    def handshake(conn: socket.socket) -> None:
        try:
            with context.wrap_socket(conn, server_side=True):
                pass
        except (OSError, ssl.SSLError):
            conn.close()

    with _serving(handshake) as port:
        yield port


class _Box:
    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
        return "250 OK"


@contextlib.contextmanager
def smtp_starttls_server(chain_pem: str, key_pem: str) -> Iterator[int]:
    """aiosmtpd offering STARTTLS with the chain; yields the port."""
    with socket.socket() as free:  # aiosmtpd's start-up check needs a real port
        free.bind(("127.0.0.1", 0))
        port = int(free.getsockname()[1])
    controller = Controller(
        _Box(), hostname="127.0.0.1", port=port, tls_context=_context(chain_pem, key_pem)
    )
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


@contextlib.contextmanager
def smtp_without_starttls() -> Iterator[int]:
    """aiosmtpd without TLS: STARTTLS is refused."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = int(free.getsockname()[1])
    controller = Controller(_Box(), hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def black_hole() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) but never answers: the
    probe's handshake waits for its timeout."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)
    try:
        yield listener.getsockname()[1]
    finally:
        listener.close()


@contextlib.contextmanager
def starttls_line_server(
    chain_pem: str, key_pem: str, protocol: str, *, offer: bool = True
) -> Iterator[int]:
    """A small IMAP or POP3 server: its greeting, then STARTTLS (IMAP `a1 STARTTLS`, POP3
    `STLS`) answered with the go-ahead and a TLS handshake, or refused (`offer=False`)."""
    context = _context(chain_pem, key_pem)
    greeting = b"* OK IMAP4rev1 ready\r\n" if protocol == "imap" else b"+OK POP3 ready\r\n"

    def answer(command: bytes) -> bytes:
        if protocol == "imap":
            tag = command.split(b" ", 1)[0]
            return tag + (b" OK Begin TLS now\r\n" if offer else b" BAD STARTTLS unknown\r\n")
        return b"+OK Begin TLS\r\n" if offer else b"-ERR STLS unknown\r\n"

    def converse(conn: socket.socket) -> None:
        try:
            conn.sendall(greeting)
            command = conn.recv(1024)
            conn.sendall(answer(command))
            if offer:
                with context.wrap_socket(conn, server_side=True):
                    pass
        except (OSError, ssl.SSLError):
            pass
        finally:
            conn.close()

    with _serving(converse) as port:
        yield port
