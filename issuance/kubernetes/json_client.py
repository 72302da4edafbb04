"""JSON-level access to a Kubernetes API server, shared by the CSR connector
(issuance.kubernetes.csr_connector) and the cert-manager mirror (issuance.kubernetes.certmanager).

Objects stay plain dicts (`_preload_content=False`): the connector must read CSRs from
API servers older and newer than the client's models (spec.expirationSeconds exists only
since 1.22), cert-manager's fields are unknown to the client's models altogether, and a
dict round-trips fields the client does not know. Every call has a timeout
(REQUEST_TIMEOUT; a watch a read timeout a little above its server timeout).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from kubernetes.client.exceptions import ApiException

Obj = dict[str, Any]
# connect, read (seconds) for every call but watches, which set their own read timeout.
REQUEST_TIMEOUT = (5.0, 15.0)

__all__ = [
    "REQUEST_TIMEOUT",
    "ApiException",
    "Obj",
    "WatchStream",
    "json_body",
    "watch_options",
]


def watch_timeout(timeout_seconds: int) -> tuple[float, float]:
    """(connect, read) for a watch the server closes after `timeout_seconds`: the read timeout
    is a little longer, so a silently dead connection cannot hang a watcher forever."""
    return (REQUEST_TIMEOUT[0], timeout_seconds + 10)


def watch_options(resource_version: str, timeout_seconds: int) -> dict[str, Any]:
    """The keyword arguments of a watch call (any list_* method of the client)."""
    return {
        "watch": True,
        "resource_version": resource_version,
        "allow_watch_bookmarks": True,
        "timeout_seconds": timeout_seconds,
        "_preload_content": False,
        "_request_timeout": watch_timeout(timeout_seconds),
    }


class WatchStream:
    """An open watch (the request is made when this is built, so opening errors are raised
    there): iterate its events; `abort()`, from another thread, ends the iteration at once
    instead of waiting up to the server timeout."""

    def __init__(self, response: Any) -> None:
        self.response = response

    def __iter__(self) -> Iterator[Obj]:
        try:
            buffer = b""
            for chunk in self.response.stream(4096, decode_content=True):
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buffer.strip():
                yield json.loads(buffer)
        finally:
            self.response.release_conn()

    def abort(self) -> None:
        # urllib3's shutdown() interrupts a read blocked in another thread.
        with contextlib.suppress(Exception):
            self.response.shutdown()


def json_body(response: Any) -> Obj:
    """The JSON of an unpreloaded (`_preload_content=False`) answer."""
    data = response.data if hasattr(response, "data") else response.read()
    loaded: Obj = json.loads(data)
    return loaded
