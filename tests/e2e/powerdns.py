"""A real PowerDNS Authoritative for DNS-01 tests through dns-lexicon's `powerdns` provider.

Plain helpers (no pytest imports), like tests/e2e/bind9.py:

    with powerdns_server(Path(tmp)) as pdns:     # zones example.test + example.org
        pdns.address                              # "127.0.0.1:<port>" (DNS, UDP and TCP)
        pdns.api_url, pdns.api_key                # its HTTP API (lexicon's pdns_server, auth_token)
        pdns.txt("_acme-challenge.www.example.test")    # current TXT values, asked over DNS
        pdns.api_txt("_acme-challenge.www.example.test")  # the same, read through the API
        pdns.add_record("x.example.test", "CNAME", "y.example.org.")

Debian's pdns_server with the gsqlite3 backend: a database made from the package's schema,
its own --config-dir (nothing of /etc/powerdns is read), the webserver and API on with an
API key, DNS and HTTP on free loopback ports, in the foreground (no daemon, no guardian) as
a child process that is stopped on exit. Zones are created through the API, each with an
SOA, NS ns.<zone> (127.0.0.1), and `@`/`*` A 127.0.0.1, as in the BIND9 fixture. The
server's caches are off so a test reads what the API just wrote.
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dns.exception
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import requests

from tests.e2e.servers import Process, free_port, free_tcp_udp_port, start_process, wait_until

PDNS_SERVER = "/usr/sbin/pdns_server"
SCHEMA = Path("/usr/share/pdns-backend-sqlite3/schema/schema.sqlite3.sql")
DEFAULT_ZONES = ("example.test", "example.org")


@dataclass
class PowerDnsServer:
    process: Process
    host: str
    port: int
    api_port: int
    api_key: str
    zones: tuple[str, ...]
    workdir: Path

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        """What lexicon's `pdns_server` option wants (it appends /api/v1 itself)."""
        return f"http://{self.host}:{self.api_port}"

    def api(self, method: str, path: str, body: Any = None) -> requests.Response:
        response = requests.request(
            method,
            f"{self.api_url}/api/v1/servers/localhost{path}",
            json=body,
            headers={"X-API-Key": self.api_key},
            timeout=10,
        )
        response.raise_for_status()
        return response

    def query(self, name: str, rdtype: str = "TXT") -> dns.message.Message:
        request = dns.message.make_query(name, dns.rdatatype.from_text(rdtype))
        return dns.query.udp(request, self.host, port=self.port, timeout=5)

    def txt(self, name: str) -> list[str]:
        """The TXT strings at `name` as the DNS side serves them (empty when none)."""
        values: list[str] = []
        for rrset in self.query(name, "TXT").answer:
            if rrset.rdtype == dns.rdatatype.TXT:
                values += [b"".join(r.strings).decode() for r in rrset]
        return sorted(values)

    def api_txt(self, name: str) -> list[str]:
        """The TXT values at `name` as stored (read through the HTTP API)."""
        fqdn = name.rstrip(".") + "."
        zone = next(z for z in self.zones if fqdn.endswith(f".{z}.") or fqdn == f"{z}.")
        data = self.api("GET", f"/zones/{zone}.").json()
        return sorted(
            r["content"].strip('"')
            for rrset in data["rrsets"]
            if rrset["name"] == fqdn and rrset["type"] == "TXT"
            for r in rrset["records"]
        )

    def add_record(self, name: str, rtype: str, content: str, ttl: int = 60) -> None:
        fqdn = name.rstrip(".") + "."
        zone = next(z for z in self.zones if fqdn.endswith(f".{z}.") or fqdn == f"{z}.")
        rrset = {
            "name": fqdn,
            "type": rtype,
            "ttl": ttl,
            "changetype": "REPLACE",
            "records": [{"content": content, "disabled": False}],
        }
        self.api("PATCH", f"/zones/{zone}.", {"rrsets": [rrset]})

    def stop(self) -> None:
        self.process.stop()


def _config(workdir: Path, port: int, api_port: int, api_key: str) -> str:
    return "\n".join(
        [
            "launch=gsqlite3",
            f"gsqlite3-database={workdir / 'pdns.sqlite3'}",
            "local-address=127.0.0.1",
            f"local-port={port}",
            "webserver=yes",
            "webserver-address=127.0.0.1",
            f"webserver-port={api_port}",
            "webserver-allow-from=127.0.0.0/8",
            "api=yes",
            f"api-key={api_key}",
            "daemon=no",
            "guardian=no",
            "disable-syslog=yes",
            f"socket-dir={workdir}",
            "distributor-threads=1",
            "receiver-threads=1",
            # A test reads right after the API wrote: no cached (negative) answers.
            "cache-ttl=0",
            "negquery-cache-ttl=0",
            "query-cache-ttl=0",
            "zone-cache-refresh-interval=0",
            "",
        ]
    )


def _zone_body(zone: str) -> dict[str, Any]:
    fqdn = f"{zone}."

    def rrset(name: str, rtype: str, content: str) -> dict[str, Any]:
        return {
            "name": name,
            "type": rtype,
            "ttl": 60,
            "records": [{"content": content, "disabled": False}],
        }

    return {
        "name": fqdn,
        "kind": "Native",
        "rrsets": [
            rrset(fqdn, "SOA", f"ns.{fqdn} hostmaster.{fqdn} 1 60 60 600 60"),
            rrset(fqdn, "NS", f"ns.{fqdn}"),
            rrset(f"ns.{fqdn}", "A", "127.0.0.1"),
            rrset(fqdn, "A", "127.0.0.1"),
            rrset(f"*.{fqdn}", "A", "127.0.0.1"),
        ],
    }


def start_powerdns(workdir: Path, zones: Sequence[str] = DEFAULT_ZONES) -> PowerDnsServer:
    workdir = (workdir / "powerdns").resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(workdir / "pdns.sqlite3") as db:
        db.executescript(SCHEMA.read_text())
    port = free_tcp_udp_port()
    api_port = free_port()
    api_key = secrets.token_urlsafe(24)
    (workdir / "pdns.conf").write_text(_config(workdir, port, api_port, api_key))
    argv = [PDNS_SERVER, f"--config-dir={workdir}"]
    proc = start_process("pdns_server", argv, workdir, cwd=workdir)
    server = PowerDnsServer(
        process=proc,
        host="127.0.0.1",
        port=port,
        api_port=api_port,
        api_key=api_key,
        zones=tuple(zones),
        workdir=workdir,
    )
    wait_until(lambda: server.api("GET", "/zones").ok, 30, "the PowerDNS API", proc)
    for zone in zones:
        server.api("POST", "/zones", _zone_body(zone))

    def serving() -> bool:
        try:
            response = server.query(zones[0], "SOA")
        except dns.exception.Timeout:
            return False
        return response.rcode() == dns.rcode.NOERROR and bool(response.answer)

    wait_until(serving, 30, "PowerDNS serving its zones", proc)
    return server


@contextlib.contextmanager
def powerdns_server(
    workdir: Path, zones: Sequence[str] = DEFAULT_ZONES
) -> Iterator[PowerDnsServer]:
    server = start_powerdns(workdir, zones)
    try:
        yield server
    finally:
        server.stop()
