"""A real BIND9 for DNS-01 tests: authoritative zones that accept RFC 2136 updates with TSIG.

Plain helpers (no pytest imports), like tests/e2e/servers.py:

    with bind9_server(Path(tmp)) as bind:       # example.test + example.org, hmac-sha256 key
        bind.address                             # "127.0.0.1:<port>" (UDP and TCP)
        bind.key_name, bind.secret, bind.algorithm, bind.zones
        bind.txt("_acme-challenge.www.example.test")   # current TXT values

Each zone has SOA/NS pointing at ns.<zone> (127.0.0.1), `@` and `*` A 127.0.0.1, and
`allow-update { key <name>; }`. named runs in the foreground (-g) as a child process with
its own working directory, and is stopped (SIGTERM, then SIGKILL) on exit.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.update

from tests.e2e.servers import Process, free_tcp_udp_port, start_process, wait_until

NAMED = "/usr/sbin/named"
DEFAULT_ZONES = ("example.test", "example.org")


@dataclass
class Bind9Server:
    process: Process
    host: str
    port: int
    key_name: str
    secret: str
    algorithm: str
    zones: tuple[str, ...]
    workdir: Path

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def cert_manager_algorithm(self) -> str:
        """The tsigAlgorithm spelling cert-manager uses (HMACSHA256 for hmac-sha256)."""
        return self.algorithm.replace("-", "").upper()

    def query(self, name: str, rdtype: str = "TXT") -> dns.message.Message:
        request = dns.message.make_query(name, dns.rdatatype.from_text(rdtype))
        return dns.query.udp(request, self.host, port=self.port, timeout=5)

    def txt(self, name: str) -> list[str]:
        """The TXT strings at `name` (empty when there are none)."""
        response = self.query(name, "TXT")
        values: list[str] = []
        for rrset in response.answer:
            if rrset.rdtype != dns.rdatatype.TXT:
                continue
            for rdata in rrset:
                values.append(b"".join(rdata.strings).decode())
        return sorted(values)

    def stop(self) -> None:
        self.process.stop()


def _zone_file(zone: str) -> str:
    return (
        "$TTL 60\n"
        f"@ IN SOA ns.{zone}. hostmaster.{zone}. ( 1 60 60 600 60 )\n"
        f"@ IN NS ns.{zone}.\n"
        "ns IN A 127.0.0.1\n"
        "@ IN A 127.0.0.1\n"
        "* IN A 127.0.0.1\n"
    )


def _named_conf(workdir: Path, port: int, key_name: str, secret: str, zones: Sequence[str]) -> str:
    zone_blocks = "".join(
        f'zone "{zone}" {{\n'
        "  type primary;\n"
        f'  file "{workdir / (zone + ".zone")}";\n'
        f'  allow-update {{ key "{key_name}"; }};\n'
        "};\n"
        for zone in zones
    )
    return (
        "options {\n"
        f'  directory "{workdir}";\n'
        f'  pid-file "{workdir / "named.pid"}";\n'
        f'  session-keyfile "{workdir / "session.key"}";\n'
        f'  managed-keys-directory "{workdir}";\n'
        f"  listen-on port {port} {{ 127.0.0.1; }};\n"
        "  listen-on-v6 { none; };\n"
        "  recursion no;\n"
        "  dnssec-validation no;\n"
        "  notify no;\n"
        "  allow-transfer { none; };\n"
        "};\n"
        "controls { };\n"
        f'key "{key_name}" {{\n  algorithm hmac-sha256;\n  secret "{secret}";\n}};\n'
        f"{zone_blocks}"
    )


def start_bind9(
    workdir: Path,
    zones: Sequence[str] = DEFAULT_ZONES,
    key_name: str = "issuance-test-key.",
) -> Bind9Server:
    workdir = (workdir / "bind9").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_tcp_udp_port()
    secret = base64.b64encode(secrets.token_bytes(32)).decode()
    for zone in zones:
        (workdir / f"{zone}.zone").write_text(_zone_file(zone))
    conf = workdir / "named.conf"
    conf.write_text(_named_conf(workdir, port, key_name, secret, zones))
    # -g: foreground, log to stderr; -u root: we may be root in CI and named wants a user;
    # -n 1: one worker thread is plenty and the machine is shared.
    argv = [NAMED, "-g", "-4", "-n", "1", "-c", str(conf), "-p", str(port)]
    if os.geteuid() == 0:
        argv += ["-u", "root"]
    proc = start_process("named", argv, workdir, cwd=workdir)
    server = Bind9Server(
        process=proc,
        host="127.0.0.1",
        port=port,
        key_name=key_name,
        secret=secret,
        algorithm="hmac-sha256",
        zones=tuple(zones),
        workdir=workdir,
    )

    def serving() -> bool:
        try:
            response = server.query(zones[0], "SOA")
        except dns.exception.Timeout:
            return False
        return response.rcode() == dns.rcode.NOERROR and bool(response.answer)

    wait_until(serving, 30, "BIND9 serving its zones", proc)
    return server


@contextlib.contextmanager
def bind9_server(workdir: Path, zones: Sequence[str] = DEFAULT_ZONES) -> Iterator[Bind9Server]:
    server = start_bind9(workdir, zones)
    try:
        yield server
    finally:
        server.stop()


# -- a webhook DNS provider that updates BIND9 itself ----------------------------------


@dataclass
class WebhookProvider:
    """POST {"action","fqdn","value"} → a TSIG-signed RFC 2136 update at BIND9 (real DNS)."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    calls: list[dict[str, Any]]

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/dns"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _webhook_update(bind: Bind9Server, action: str, fqdn: str, value: str) -> int:
    name = dns.name.from_text(fqdn)
    zone = next(
        (dns.name.from_text(z) for z in bind.zones if name.is_subdomain(dns.name.from_text(z))),
        None,
    )
    if zone is None:
        return 404
    key = dns.tsig.Key(bind.key_name, bind.secret, algorithm=dns.tsig.HMAC_SHA256)
    update = dns.update.UpdateMessage(zone, keyring=key)
    if action == "present":
        update.add(name, 60, "TXT", f'"{value}"')
    elif action == "cleanup":
        update.delete(name, "TXT", f'"{value}"')
    else:
        return 400
    response = dns.query.tcp(update, bind.host, port=bind.port, timeout=10)
    return 200 if response.rcode() == dns.rcode.NOERROR else 502


def start_webhook_provider(
    bind: Bind9Server,
    fail_with: int | None = None,
    after: Callable[[str, int], None] | None = None,
) -> WebhookProvider:
    """`fail_with`: answer every call with this status instead; `after(action, status)`:
    called after each update (a test's hook, e.g. to stop BIND9 once a record is in)."""
    calls: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            calls.append(body)
            action = str(body.get("action"))
            status = fail_with or _webhook_update(
                bind, action, str(body.get("fqdn")), str(body.get("value"))
            )
            if after is not None:
                after(action, status)
            payload = b'{"ok": true}' if status == 200 else b'{"error": "update failed"}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return WebhookProvider(server=server, thread=thread, calls=calls)
