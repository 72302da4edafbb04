"""Connect to one endpoint and read the certificate chain it serves: plain TLS, or a plain
greeting first and STARTTLS (SMTP, IMAP, POP3). Network only: no models, no database, so a
probe never holds a transaction or a lock while it waits on a server.

Every socket operation is bounded by `timeout` (PROBE_TIMEOUT, 5 s, by default): connect,
each line of the STARTTLS dialogue and the handshake. The chain is read without verifying
it (verification is `assess.py`'s job, against the issuer's CA): a server that serves the
wrong or an expired certificate must still tell us which one it serves.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from typing import Any, Literal

PROBE_TIMEOUT = 5.0

Protocol = Literal["tls", "smtp", "imap", "pop3"]
PROTOCOLS: tuple[Protocol, ...] = ("tls", "smtp", "imap", "pop3")
# What an operator sees for each kind of failure (EndpointProbe.errorKind).
FailureKind = Literal["refused", "timeout", "unresolvable", "starttls", "handshake", "network"]

# A line of a STARTTLS dialogue: servers answer in a few hundred bytes.
_MAX_LINE = 8192


class ProbeFailure(Exception):
    """The endpoint could not be read: `kind` says how, the message says what happened."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind: FailureKind = kind


@dataclass(frozen=True)
class Served:
    """What the endpoint served: the chain in the order sent (leaf first), DER."""

    chain_der: list[bytes]
    tls_version: str


def fetch(
    host: str,
    port: int,
    server_name: str,
    protocol: Protocol,
    timeout: float = PROBE_TIMEOUT,
) -> Served:
    """Connect, (STARTTLS,) handshake and return the served chain; ProbeFailure otherwise."""
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError as exc:
        raise ProbeFailure("refused", f"connection refused by {host}:{port}") from exc
    except TimeoutError as exc:
        raise ProbeFailure(
            "timeout", f"no connection to {host}:{port} within {timeout:g} s"
        ) from exc
    except socket.gaierror as exc:
        raise ProbeFailure("unresolvable", f"cannot resolve {host}: {exc.strerror}") from exc
    except OSError as exc:
        raise ProbeFailure("network", f"cannot connect to {host}:{port}: {exc}") from exc
    with raw:
        raw.settimeout(timeout)
        try:
            if protocol != "tls":
                _starttls(raw, protocol)
            return _handshake(raw, server_name)
        except TimeoutError as exc:
            step = "the TLS handshake" if protocol == "tls" else "STARTTLS or the handshake"
            raise ProbeFailure(
                "timeout", f"{host}:{port} did not answer {step} within {timeout:g} s"
            ) from exc
        except ConnectionError as exc:
            raise ProbeFailure("handshake", f"{host}:{port} closed the connection: {exc}") from exc


def _handshake(raw: socket.socket, server_name: str) -> Served:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # Read whatever is served; assess.py verifies the chain against the issuer's CA.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        tls = context.wrap_socket(raw, server_hostname=server_name or None)
    except ssl.SSLError as exc:
        raise ProbeFailure("handshake", f"TLS handshake failed: {exc.reason or exc}") from exc
    try:
        chain = _unverified_chain(tls)
        return Served(chain_der=chain, tls_version=tls.version() or "")
    finally:
        tls.close()


def _unverified_chain(tls: ssl.SSLSocket) -> list[bytes]:
    # The whole chain the server sent. Python 3.13 names this SSLSocket.get_unverified_chain;
    # 3.10 to 3.12 have it on the underlying _ssl object only. Without it, the leaf alone.
    sslobj: Any = getattr(tls, "_sslobj", None)
    getter = getattr(sslobj, "get_unverified_chain", None)
    if getter is not None:
        certs = getter() or []
        return [bytes(c.public_bytes(ssl._ssl.ENCODING_DER)) for c in certs]  # type: ignore[attr-defined]
    leaf = tls.getpeercert(binary_form=True)
    return [leaf] if leaf else []


# -- STARTTLS ----------------------------------------------------------------------------


class _Lines:
    """Reads CRLF-terminated lines from a socket (each recv bounded by its timeout)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def line(self) -> str:
        while b"\n" not in self.buffer:
            if len(self.buffer) > _MAX_LINE:
                raise ProbeFailure("starttls", "the server sent an over-long line")
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ProbeFailure("starttls", "the server closed the connection before TLS")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.rstrip(b"\r").decode("latin-1")

    def send(self, text: str) -> None:
        self.sock.sendall(text.encode("ascii") + b"\r\n")


def _smtp_reply(lines: _Lines) -> tuple[int, str]:
    """One SMTP reply (possibly multi-line: "250-..." until "250 ...")."""
    while True:
        line = lines.line()
        if len(line) < 3 or not line[:3].isdigit():
            raise ProbeFailure("starttls", f"not an SMTP reply: {line[:80]!r}")
        if len(line) == 3 or line[3] != "-":
            return int(line[:3]), line


def _starttls(sock: socket.socket, protocol: Protocol) -> None:
    lines = _Lines(sock)
    if protocol == "smtp":
        code, line = _smtp_reply(lines)
        if code != 220:
            raise ProbeFailure("starttls", f"the SMTP greeting was {line[:80]!r}")
        lines.send("EHLO issuance-console.invalid")
        code, line = _smtp_reply(lines)
        if code != 250:
            raise ProbeFailure("starttls", f"EHLO was answered {line[:80]!r}")
        lines.send("STARTTLS")
        code, line = _smtp_reply(lines)
        if code != 220:
            raise ProbeFailure("starttls", f"STARTTLS refused: {line[:80]!r}")
    elif protocol == "imap":
        greeting = lines.line()
        if not greeting.startswith("* OK"):
            raise ProbeFailure("starttls", f"the IMAP greeting was {greeting[:80]!r}")
        lines.send("a1 STARTTLS")
        while True:
            line = lines.line()
            if line.startswith("a1 "):
                break
        if not line.startswith("a1 OK"):
            raise ProbeFailure("starttls", f"STARTTLS refused: {line[:80]!r}")
    else:  # pop3
        greeting = lines.line()
        if not greeting.startswith("+OK"):
            raise ProbeFailure("starttls", f"the POP3 greeting was {greeting[:80]!r}")
        lines.send("STLS")
        line = lines.line()
        if not line.startswith("+OK"):
            raise ProbeFailure("starttls", f"STLS refused: {line[:80]!r}")
    if lines.buffer:  # bytes after the go-ahead would be read as the TLS handshake
        raise ProbeFailure("starttls", "the server sent data after agreeing to STARTTLS")
