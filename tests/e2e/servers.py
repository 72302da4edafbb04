"""Real servers for end-to-end tests: Pebble (ACME CA), pebble-challtestsrv (DNS), uvicorn.

Plain helpers (no pytest imports) so tests, fixtures and bench/ can all use them:

    workdir = Path(tmp)
    dns = start_challtestsrv(workdir)                      # A queries -> 127.0.0.1
    pebble = start_pebble(workdir, http_port=5002, dns_server=dns.dns_address)
    issuer spec: {"acme": {"server": pebble.directory_url, "caBundle": pebble.ca_bundle_b64}}
    pebble.roots()  -> Pebble's issuing root(s), to verify chains
    pebble.stop(); dns.stop()

Every process logs to <workdir>/<name>.log (kept for debugging) and is killed on stop().
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ipaddress
import itertools
import json
import logging
import os
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

PEBBLE = "/usr/bin/pebble"
CHALLTESTSRV = "/usr/bin/pebble-challtestsrv"
REPO = Path(__file__).resolve().parents[2]

# Fixed EAB keys for Pebble (kid -> base64url HMAC key), as in Pebble's example config.
EAB_KEYS: dict[str, str] = {
    "kid-1": "zWNDZM6eQGHWpSRTPal5eIUYFTu7EajVIoguysqZ9wG44nMEtx3MUAsUDkMTQ12W",
    "kid-2": "b10lLJs8l1GPIzsLP0s6pMt8O0XVGnfTaCeROxQM0BIt2XrJMDHJZBM5NuQmQJQH",
}


def free_port(host: str = "127.0.0.1", kind: int = socket.SOCK_STREAM) -> int:
    """A port nobody listens on right now (TCP by default; pass SOCK_DGRAM for UDP)."""
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def free_tcp_udp_port(host: str = "127.0.0.1") -> int:
    """A port free for both TCP and UDP (DNS servers listen on both)."""
    for _ in range(50):
        port = free_port(host)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            try:
                udp.bind((host, port))
            except OSError:
                continue
            return port
    raise RuntimeError("no port free for both TCP and UDP")


# -- TLS for Pebble's own endpoint -------------------------------------------------


@dataclass(frozen=True)
class TLSFiles:
    ca_pem: str
    cert_path: Path
    key_path: Path
    ca_path: Path


def make_tls_files(workdir: Path, names: Sequence[str] = ("localhost",)) -> TLSFiles:
    """A throw-away CA and a server certificate for 127.0.0.1/::1/localhost (+ names)."""
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "e2e test TLS CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans += [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    sans += [x509.IPAddress(ipaddress.ip_address("::1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    workdir.mkdir(parents=True, exist_ok=True)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM).decode()
    ca_path = workdir / "tls-ca.pem"
    cert_path = workdir / "tls-cert.pem"
    key_path = workdir / "tls-key.pem"
    ca_path.write_text(ca_pem)
    cert_path.write_text(cert.public_bytes(serialization.Encoding.PEM).decode())
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return TLSFiles(ca_pem=ca_pem, cert_path=cert_path, key_path=key_path, ca_path=ca_path)


# -- processes ---------------------------------------------------------------------


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        if self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(timeout)

    def kill(self) -> None:
        """SIGKILL, like a crash (no cleanup in the child)."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def start_process(
    name: str,
    argv: Sequence[str],
    workdir: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Process:
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / f"{name}.log"
    full_env = {**os.environ, **(env or {})}
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            list(argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=str(cwd or REPO),
        )
    return Process(name=name, popen=popen, log_path=log_path)


def wait_until(check: Any, timeout: float, what: str, process: Process | None = None) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if process is not None and not process.alive():
            raise RuntimeError(f"{process.name} exited while waiting for {what}:\n{process.log()}")
        try:
            if check():
                return
        except Exception as exc:  # any failure means "not yet"
            last = exc
        time.sleep(0.05)
    tail = process.log()[-3000:] if process else ""
    raise TimeoutError(f"timed out waiting for {what} (last error: {last})\n{tail}")


def wait_for_tcp(host: str, port: int, timeout: float = 20, process: Process | None = None) -> None:
    def check() -> bool:
        with socket.create_connection((host, port), timeout=1):
            return True

    wait_until(check, timeout, f"{host}:{port}", process)


# -- pebble-challtestsrv (mock DNS for Pebble) ---------------------------------------


@dataclass
class ChallTestSrv:
    """Answers every A query with `default_ipv4` unless a record was added via management."""

    process: Process
    dns_port: int
    management_port: int

    @property
    def dns_address(self) -> str:
        return f"127.0.0.1:{self.dns_port}"

    def _post(self, path: str, body: dict[str, Any]) -> None:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.management_port}{path}",
            data=json.dumps(body).encode(),
            method="POST",
        )
        with urllib.request.urlopen(req, timeout=10) as resp:  # noqa: S310 - http URL we built
            resp.read()

    def add_a(self, host: str, addresses: Sequence[str]) -> None:
        """Resolve `host` to `addresses` (e.g. 127.0.0.2, where nothing listens)."""
        self._post("/add-a", {"host": host, "addresses": list(addresses)})

    def clear_a(self, host: str) -> None:
        self._post("/clear-a", {"host": host})

    def add_txt(self, host: str, value: str) -> None:
        self._post("/set-txt", {"host": host, "value": value})

    def stop(self) -> None:
        self.process.stop()


def start_challtestsrv(
    workdir: Path,
    default_ipv4: str = "127.0.0.1",
    *,
    dns_port: int | None = None,
    management_port: int | None = None,
) -> ChallTestSrv:
    """pebble-challtestsrv on free ports, or on given ones (to restart one on its ports)."""
    dns_port = dns_port or free_tcp_udp_port()
    mgmt_port = management_port or free_port()
    argv = [
        CHALLTESTSRV,
        "-defaultIPv4",
        default_ipv4,
        "-defaultIPv6",
        "",
        "-dns01",
        f"127.0.0.1:{dns_port}",
        "-management",
        f"127.0.0.1:{mgmt_port}",
        "-http01",
        "",
        "-https01",
        "",
        "-tlsalpn01",
        "",
    ]
    proc = start_process("challtestsrv", argv, workdir)
    wait_for_tcp("127.0.0.1", mgmt_port, process=proc)
    wait_for_tcp("127.0.0.1", dns_port, process=proc)
    return ChallTestSrv(process=proc, dns_port=dns_port, management_port=mgmt_port)


# -- Pebble --------------------------------------------------------------------------


@dataclass
class PebbleServer:
    process: Process
    port: int
    management_port: int
    http_port: int
    dns_server: str
    tls: TLSFiles
    eab_keys: dict[str, str] = field(default_factory=dict)

    @property
    def directory_url(self) -> str:
        return f"https://127.0.0.1:{self.port}/dir"

    @property
    def management_url(self) -> str:
        return f"https://127.0.0.1:{self.management_port}"

    @property
    def ca_bundle_pem(self) -> str:
        """The CA of Pebble's own HTTPS endpoint (not the issuing root)."""
        return self.tls.ca_pem

    @property
    def ca_bundle_b64(self) -> str:
        """What an issuer's spec.acme.caBundle holds (base64 of the PEM)."""
        return base64.b64encode(self.tls.ca_pem.encode()).decode()

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.tls.ca_path))

    def get(self, path_or_url: str) -> bytes:
        url = path_or_url if "://" in path_or_url else self.management_url + path_or_url
        with urllib.request.urlopen(url, context=self._ssl(), timeout=10) as resp:  # noqa: S310
            return bytes(resp.read())

    def roots(self) -> list[str]:
        """Issuing root certificates (PEM): /roots/0 plus any alternates Pebble generated."""
        pems = [self.get("/roots/0").decode()]
        index = 1
        while True:
            try:
                pems.append(self.get(f"/roots/{index}").decode())
            except urllib.error.HTTPError:
                return pems
            index += 1

    def intermediates(self) -> list[str]:
        pems = [self.get("/intermediates/0").decode()]
        index = 1
        while True:
            try:
                pems.append(self.get(f"/intermediates/{index}").decode())
            except urllib.error.HTTPError:
                return pems
            index += 1

    def directory(self) -> dict[str, Any]:
        return dict(json.loads(self.get(self.directory_url)))

    def stop(self) -> None:
        self.process.stop()


def start_pebble(
    workdir: Path,
    *,
    http_port: int,
    dns_server: str,
    tls_port: int | None = None,
    eab_required: bool = False,
    eab_keys: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    name: str = "pebble",
) -> PebbleServer:
    """Start Pebble validating HTTP-01 on `http_port` and resolving names via `dns_server`.

    Nonce rejection stays at Pebble's default (5 %) unless `env` sets PEBBLE_WFE_NONCEREJECT,
    so badNonce retries are exercised. PEBBLE_VA_NOSLEEP=1 removes the validation sleeps.
    """
    workdir = workdir / name
    tls = make_tls_files(workdir)
    port = free_port()
    mgmt_port = free_port()
    keys = dict(eab_keys if eab_keys is not None else (EAB_KEYS if eab_required else {}))
    config = {
        "pebble": {
            "listenAddress": f"127.0.0.1:{port}",
            "managementListenAddress": f"127.0.0.1:{mgmt_port}",
            "certificate": str(tls.cert_path),
            "privateKey": str(tls.key_path),
            "httpPort": http_port,
            "tlsPort": tls_port or free_port(),
            "ocspResponderURL": "",
            "externalAccountBindingRequired": eab_required,
            "externalAccountMACKeys": keys,
        }
    }
    config_path = workdir / "pebble-config.json"
    config_path.write_text(json.dumps(config, indent=2))
    argv = [PEBBLE, "-config", str(config_path), "-dnsserver", dns_server, "-strict=false"]
    proc = start_process(
        name, argv, workdir, env={"PEBBLE_VA_NOSLEEP": "1", **(env or {})}, cwd=workdir
    )
    server = PebbleServer(
        process=proc,
        port=port,
        management_port=mgmt_port,
        http_port=http_port,
        dns_server=dns_server,
        tls=tls,
        eab_keys=keys,
    )
    wait_until(lambda: bool(server.directory()), 30, "Pebble directory", proc)
    return server


# -- the web app (HTTP-01 responder, REST API) ------------------------------------------


def start_uvicorn(
    workdir: Path,
    port: int,
    env: Mapping[str, str],
    name: str = "web",
    host: str = "127.0.0.1",
) -> Process:
    """Serve console.asgi on `port`; a large backlog because Pebble's VA fetches in bursts."""
    argv = [
        sys.executable,
        "-m",
        "uvicorn",
        "console.asgi:application",
        "--host",
        host,
        "--port",
        str(port),
        "--backlog",
        "4096",
        "--no-access-log",
        "--log-level",
        "warning",
    ]
    proc = start_process(name, argv, workdir, env=env)
    wait_for_tcp(host, port, timeout=30, process=proc)
    return proc


class DjangoThreadServer:
    """The Django app served from a thread of this process (tests share its database).

    For HTTP-01 in tests that drive the worker in-process: the token view reads the same
    (test) database. A listen backlog of 1024 because Pebble's VA fetches in bursts.
    """

    def __init__(self, port: int, host: str = "127.0.0.1") -> None:
        import threading

        from django.core.handlers.wsgi import WSGIHandler
        from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

        class QuietHandler(WSGIRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadedWSGIServer):
            request_queue_size = 1024

        self.port = port
        self.server = Server((host, port), QuietHandler, allow_reuse_address=True)
        self.server.set_app(WSGIHandler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        from django.db import connections

        self.server.shutdown()
        self.server.server_close()
        connections.close_all()


def manage_py(
    workdir: Path, args: Sequence[str], env: Mapping[str, str], name: str = "manage"
) -> Process:
    """Run `python manage.py <args>` in the background (e.g. `reconcile`)."""
    return start_process(name, [sys.executable, "manage.py", *args], workdir, env=env)


@contextlib.contextmanager
def pebble_stack(
    workdir: Path,
    *,
    http_port: int | None = None,
    eab_required: bool = False,
    env: Mapping[str, str] | None = None,
) -> Iterator[tuple[PebbleServer, ChallTestSrv]]:
    """challtestsrv + Pebble (HTTP-01 on `http_port`, a free port by default); stopped on exit."""
    dns = start_challtestsrv(workdir)
    try:
        pebble = start_pebble(
            workdir,
            http_port=http_port or free_port(),
            dns_server=dns.dns_address,
            eab_required=eab_required,
            env=env,
        )
        try:
            yield pebble, dns
        finally:
            pebble.stop()
    finally:
        dns.stop()


# -- moto's Route 53 API, and the nameserver of one of its hosted zones -----------------


@dataclass
class MotoServer:
    """moto in server mode: AWS APIs (Route 53, IAM, …) over HTTP on a loopback port.

    With `auth=True`, every request after the first `free_actions` must be signed with an
    access key moto's IAM knows, and is checked against that user's policies (moto's
    INITIAL_NO_AUTH_ACTION_COUNT): a wrong secret is refused like AWS refuses it.
    """

    process: Process
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, service: str, access_key: str, secret_key: str) -> Any:
        import boto3  # type: ignore[import-untyped]

        return boto3.session.Session().client(
            service,
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=access_key,
            aws_secret_access_key=secret_key,
        )

    def stop(self) -> None:
        self.process.stop()


def start_moto(workdir: Path, *, free_actions: int | None = None) -> MotoServer:
    """`python -m moto.server` on a free port; `free_actions`: requests allowed unsigned
    before moto checks every request's signature and IAM policy (None: never checks)."""
    port = free_port()
    env = {} if free_actions is None else {"INITIAL_NO_AUTH_ACTION_COUNT": str(free_actions)}
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    proc = start_process("moto", argv, workdir, env=env)
    wait_for_tcp("127.0.0.1", port, timeout=60, process=proc)
    return MotoServer(process=proc, port=port)


def _route53_value(value: str) -> str:
    """A record value as the Route 53 API gives it (zone-file text). moto 5.2 gives its
    default SOA's as the repr of a dict ("{'Value': '…'}"): take the text inside."""
    import ast

    if value.startswith("{'Value':"):
        return str(ast.literal_eval(value)["Value"])
    return value


class Route53Nameserver:
    """The authoritative nameserver of one hosted zone of a (moto) Route 53 API, on loopback
    UDP and TCP, as Route 53's own nameservers serve what its API holds (moto has the API,
    not the nameservers). Pebble validates DNS-01 against it and the self-check asks it.

    Queries are answered from the zone's record sets as last read through the API; a
    thread reads them again every REFRESH seconds (like Route 53's propagation, a change is
    served shortly after the API took it: the product's self-check waits for it). Asking
    the API on each query instead made answers as slow as moto under load, slower than
    Pebble's DNS timeout.

    Answers are authoritative: the record set of the name and type; else the CNAME at the
    name; else NODATA (the name has records, or names below it do) or NXDOMAIN, with the
    zone's SOA in the authority section. Names outside the zone are REFUSED.
    """

    def __init__(self, route53: Any, zone_id: str) -> None:
        import socketserver
        import threading

        import dns.name

        self.route53 = route53
        self.zone_id = zone_id
        zone = route53.get_hosted_zone(Id=zone_id)["HostedZone"]
        self.origin = dns.name.from_text(zone["Name"])
        self.port = free_tcp_udp_port()
        self.snapshot: list[dict[str, Any]] = self.record_sets()
        self.stopped = threading.Event()
        threading.Thread(target=self._refresh, daemon=True).start()
        answer = self.answer

        class Udp(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                data, sock = self.request
                sock.sendto(answer(data), self.client_address)

        class Tcp(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                size = int.from_bytes(self.rfile.read(2), "big")
                wire = answer(self.rfile.read(size))
                self.wfile.write(len(wire).to_bytes(2, "big") + wire)

        socketserver.ThreadingUDPServer.allow_reuse_address = True
        socketserver.ThreadingTCPServer.allow_reuse_address = True
        self.servers: list[socketserver.BaseServer] = [
            socketserver.ThreadingUDPServer(("127.0.0.1", self.port), Udp),
            socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Tcp),
        ]
        for server in self.servers:
            server.daemon_threads = True  # type: ignore[attr-defined]
            threading.Thread(target=server.serve_forever, daemon=True).start()

    REFRESH = 0.2

    def _refresh(self) -> None:
        while not self.stopped.wait(self.REFRESH):
            with contextlib.suppress(Exception):  # moto busy: serve the last read meanwhile
                self.snapshot = self.record_sets()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def record_sets(self) -> list[dict[str, Any]]:
        pages = self.route53.get_paginator("list_resource_record_sets")
        return [
            record_set
            for page in pages.paginate(HostedZoneId=self.zone_id)
            for record_set in page["ResourceRecordSets"]
        ]

    def answer(self, wire: bytes) -> bytes:
        import dns.message
        import dns.rcode

        query = dns.message.from_wire(wire)
        try:
            reply: bytes = self._answer(query).to_wire()
            return reply
        except Exception:  # say so, as a real server would, rather than leave it unanswered
            logging.getLogger(__name__).exception("Route53Nameserver: no answer to %s", query)
            failed = dns.message.make_response(query)
            failed.set_rcode(dns.rcode.SERVFAIL)
            return failed.to_wire()

    def _answer(self, query: Any) -> Any:
        import dns.flags
        import dns.message
        import dns.name
        import dns.rcode
        import dns.rdataclass
        import dns.rdatatype
        import dns.rrset

        # Route 53's answer to `query` from the record sets the API holds now.
        response = dns.message.make_response(query)
        question = query.question[0]
        if not question.name.is_subdomain(self.origin):
            response.set_rcode(dns.rcode.REFUSED)
            return response
        response.flags |= dns.flags.AA

        def rrset(record_set: dict[str, Any]) -> dns.rrset.RRset:
            return dns.rrset.from_text_list(
                dns.name.from_text(record_set["Name"]),
                int(record_set.get("TTL", 300)),
                dns.rdataclass.IN,
                record_set["Type"],
                [_route53_value(r["Value"]) for r in record_set.get("ResourceRecords", [])],
                origin=dns.name.root,
                relativize=False,
            )

        sets = self.snapshot
        here = [r for r in sets if dns.name.from_text(r["Name"]) == question.name]
        wanted = dns.rdatatype.to_text(question.rdtype)
        found = [r for r in here if r["Type"] == wanted] or [
            r for r in here if r["Type"] == "CNAME"
        ]
        if found:
            response.answer.append(rrset(found[0]))
            return response
        below = any(dns.name.from_text(r["Name"]).is_subdomain(question.name) for r in sets)
        if not here and not below:
            response.set_rcode(dns.rcode.NXDOMAIN)
        soa = [r for r in sets if r["Type"] == "SOA"]
        response.authority.extend(rrset(r) for r in soa)
        return response

    def txt(self, name: str) -> list[str]:
        """TXT values at `name`, read through the Route 53 API (quotes removed)."""
        import dns.name

        want = dns.name.from_text(name)
        return [
            record["Value"].strip('"')
            for record_set in self.record_sets()
            if record_set["Type"] == "TXT" and dns.name.from_text(record_set["Name"]) == want
            for record in record_set["ResourceRecords"]
        ]

    def stop(self) -> None:
        self.stopped.set()
        for server in self.servers:
            server.shutdown()
            server.server_close()


def verify_chain(chain_pem: str, roots_pem: Sequence[str]) -> x509.Certificate:
    """Check each certificate is signed by the next and the last by one of `roots_pem`.

    Returns the root that anchors the chain; raises AssertionError with the reason otherwise.
    """
    from issuance.pki.x509 import split_pem_chain

    certs = [x509.load_pem_x509_certificate(p.encode()) for p in split_pem_chain(chain_pem)]
    assert certs, "empty chain"
    roots = [x509.load_pem_x509_certificate(p.encode()) for p in roots_pem]
    for child, parent in itertools.pairwise(certs):
        assert child.issuer == parent.subject, f"{child.subject} not issued by {parent.subject}"
        child.verify_directly_issued_by(parent)
    last = certs[-1]
    for root in roots:
        if last.issuer == root.subject:
            last.verify_directly_issued_by(root)
            return root
        if last.subject == root.subject and last.fingerprint(hashes.SHA256()) == root.fingerprint(
            hashes.SHA256()
        ):
            return root
    raise AssertionError(f"chain ends at {last.issuer}, not one of the given roots")


if __name__ == "__main__":  # manual smoke: python tests/e2e/servers.py
    import tempfile

    with (
        tempfile.TemporaryDirectory() as tmp,
        pebble_stack(Path(tmp)) as (pebble_server, dns_server),
    ):
        print(pebble_server.directory())
        print(pebble_server.roots()[0][:80])
