"""Verifying deployments against Debian's real nginx (docs/verifying-deployments.md):
`manage.py serve` (with its worker) on a private PostgreSQL server, nginx serving TLS from
the files agent/issuance_agent.py writes and reloads, an endpoint added through the API.

The console must tell Mismatch (nginx's own certificate), Deployed (the agent ran), Deploying
(a renewal nginx has not loaded yet) and, an hour on, Stale with one notification to a real
signed-webhook receiver however often the endpoint is probed. The hour is not waited for:
as tests/factories.make_endpoint does for Stale, the endpoint's timing is set two hours back
in the database (STALE_AFTER keeps its default)."""

from __future__ import annotations

import hashlib
import json
import socket
import ssl
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from issuance.notifications import webhook_signing
from issuance.notifications.step import DETECT_INTERVAL
from issuance.probing.deployment import STALE_AFTER
from tests.e2e.servers import Process, free_port, make_tls_files, start_process, wait_for_tcp
from tests.e2e.webstack import ServeStack, certificate_body, serve_on_private_postgres
from tests.helpers import wait_for
from tests.notifications.receivers import HttpReceiver, http_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.postgres, pytest.mark.timeout(420)]

NGINX = "/usr/sbin/nginx"
AGENT = Path(__file__).resolve().parents[2] / "agent" / "issuance_agent.py"
SECRET = "an-nginx-webhook-secret"
_TOKEN = """
from issuance.delivery.downloadtokens import create_download_token
from issuance.models import Certificate
_, text = create_download_token("nginx", actor="e2e", certificate=Certificate.objects.get(name="web"))
print("TOKEN=" + text)
"""
# What tests.factories.make_endpoint does for a Stale endpoint: the current revision was
# issued (and the endpoint added) two hours ago, longer than STALE_AFTER.
_AGE = """
from datetime import timedelta
from django.utils import timezone
from issuance.models import Endpoint
past = timezone.now() - timedelta(seconds={seconds})
print("AGED=%d" % Endpoint.objects.filter(certificate__name="web").update(
    created_at=past, revision_issued_at=past))
"""

# No default site, nothing outside the directory (-p): the error log, the pid file and the
# temporary paths are all in it, the worker runs as whoever the master drops to.
_CONF = """
daemon off;
master_process on;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp/body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {tls}/tls.crt;
        ssl_certificate_key {tls}/tls.key;
        location / {{ return 200 "web\\n"; }}
    }}
}}
"""


class Nginx:
    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "nginx"
        self.tls = workdir / "tls"
        self.port = free_port()
        (self.dir / "tmp").mkdir(parents=True)
        self.tls.mkdir()
        (self.dir / "nginx.conf").write_text(
            _CONF.format(dir=self.dir, port=self.port, tls=self.tls)
        )
        # -e: the error log before the configuration is read (else /var/log/nginx/).
        self.argv = [NGINX, "-p", str(self.dir), "-c", "nginx.conf", "-e", "error.log"]
        self.process: Process | None = None

    def start(self) -> None:
        self.process = start_process("nginx", self.argv, self.dir)
        wait_for_tcp("127.0.0.1", self.port, timeout=20, process=self.process)

    def reload_command(self) -> str:
        return " ".join([*self.argv, "-s", "reload"])

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop(timeout=10)

    def served(self) -> str:
        """SHA-256 of the leaf nginx serves now, read with Python's ssl (no verification:
        which certificate, not whether it is trusted)."""
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock,
            context.wrap_socket(sock, server_hostname="web.example.test") as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        assert der is not None
        return hashlib.sha256(der).hexdigest()

    def error_log(self) -> str:
        path = self.dir / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _leaf_fingerprint(pem: str) -> str:
    return hashlib.sha256(
        x509.load_pem_x509_certificate(pem.encode()).public_bytes(Encoding.DER)
    ).hexdigest()


def _revision(stack: ServeStack, revision: int) -> None:
    def issued() -> bool:
        answer = stack.call("GET", "/api/v1/certificates/web/")
        return bool(answer.json()["status"]["revision"] == revision)

    wait_for(issued, timeout=60, what=f"revision {revision}")


def _agent(stack: ServeStack, nginx: Nginx, token_file: Path) -> None:
    argv = [
        sys.executable,
        "-I",
        "-S",
        str(AGENT),
        "--url",
        f"http://127.0.0.1:{stack.port}",
        "--certificate",
        "web",
        "--output-dir",
        str(nginx.tls),
        "--token-file",
        str(token_file),
        "--files",
        "tls.crt,tls.key",
        "--reload-command",
        nginx.reload_command(),
    ]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr + nginx.error_log()
    assert "reload command ran" in run.stdout


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _probed_after(stack: ServeStack, since: str | None) -> dict[str, Any]:
    """The one endpoint, once a probe newer than `since` is stored."""

    def probed() -> dict[str, Any] | None:
        [endpoint] = stack.call("GET", "/api/v1/certificates/web/endpoints/").json()
        probe = endpoint["lastProbe"]
        if probe is None:
            return None
        if since is not None and _at(probe["probedAt"]) <= _at(since):
            return None
        return dict(endpoint)

    return wait_for(probed, timeout=60, what=f"a probe after {since}", poll=0.3)


def _check_now(stack: ServeStack) -> dict[str, Any]:
    """Check now, as the button does; the endpoint as that probe found it."""
    [before] = stack.call("GET", "/api/v1/certificates/web/endpoints/").json()
    since = before["lastProbe"]["probedAt"] if before["lastProbe"] else None
    assert stack.call("POST", "/api/v1/certificates/web/check-endpoints/").status == 202
    return _probed_after(stack, since)


def _deployment(stack: ServeStack) -> dict[str, Any]:
    status = stack.call("GET", "/api/v1/certificates/web/").json()["status"]
    return dict(status["deployment"])


def _stale_rule(stack: ServeStack, receiver: HttpReceiver) -> None:
    channel = {"name": "ops", "url": "webhook+" + receiver.url, "secret": SECRET}
    made = stack.call("POST", "/api/v1/notification-channels/", channel)
    assert made.status == 201, made.body
    rule = {"name": "stale", "channel": "ops", "condition": "endpoint_stale"}
    made = stack.call("POST", "/api/v1/notification-rules/", rule)
    assert made.status == 201, made.body


def _bodies(receiver: HttpReceiver) -> list[dict[str, Any]]:
    out = []
    for post in receiver.posts:
        assert webhook_signing.verify(SECRET.encode(), post.body, post.headers)
        out.append(json.loads(post.body))
    return out


def test_nginx_reloaded_by_the_agent_is_deployed_and_unreloaded_is_stale(
    e2e_workdir: Path,
) -> None:
    nginx = Nginx(e2e_workdir)
    # What nginx served before the console managed its certificate: one of its own.
    own = make_tls_files(e2e_workdir / "own")
    (nginx.tls / "tls.crt").write_text(own.cert_path.read_text())
    (nginx.tls / "tls.key").write_text(own.key_path.read_text())
    try:
        nginx.start()
        with serve_on_private_postgres(e2e_workdir) as stack:
            assert (
                stack.call("POST", "/api/v1/certificates/", certificate_body("web")).status == 201
            )
            _revision(stack, 1)
            token = stack.django(_TOKEN, name="token").split("TOKEN=", 1)[1].split()[0]
            token_file = e2e_workdir / "token"
            token_file.write_text(token + "\n")
            token_file.chmod(0o600)

            # An endpoint as a user adds it: probed at once, nginx's own certificate.
            address = {"host": "127.0.0.1", "port": nginx.port, "serverName": "web.example.test"}
            added = stack.call("POST", "/api/v1/certificates/web/endpoints/", address)
            assert added.status == 201, added.body
            assert _probed_after(stack, None)["lastProbe"]["match"] == "foreign"
            assert _deployment(stack)["state"] == "Mismatch"

            # The agent writes revision 1 and reloads nginx.
            _agent(stack, nginx, token_file)
            first = stack.call("GET", "/api/v1/certificates/web/secret/").json()["tls.crt"]
            wait_for(lambda: nginx.served() == _leaf_fingerprint(first), what="revision 1 served")
            endpoint = _check_now(stack)
            assert endpoint["lastProbe"]["match"] == "current"
            assert endpoint["lastProbe"]["revision"] == 1
            assert endpoint["lastProbe"]["fingerprintSha256"] == nginx.served()
            assert _deployment(stack) == {
                "state": "Deployed",
                "endpoints": 1,
                "current": 1,
                "stale": [],
            }

            # Renewed: the new revision makes the endpoint due; nginx still has revision 1.
            assert stack.call("POST", "/api/v1/certificates/web/renew/").status == 202
            _revision(stack, 2)
            endpoint = _probed_after(stack, endpoint["lastProbe"]["probedAt"])
            assert (endpoint["lastProbe"]["match"], endpoint["lastProbe"]["revision"]) == (
                "previous",
                1,
            )
            assert endpoint["lastProbe"]["behind"] == 1
            assert _deployment(stack)["state"] == "Deploying"

            # The agent fetches revision 2 and reloads: Deployed, with what nginx serves.
            _agent(stack, nginx, token_file)
            second = stack.call("GET", "/api/v1/certificates/web/secret/").json()["tls.crt"]
            assert second != first
            wait_for(lambda: nginx.served() == _leaf_fingerprint(second), what="revision 2 served")
            endpoint = _check_now(stack)
            probe = endpoint["lastProbe"]
            assert (probe["match"], probe["revision"]) == ("current", 2)
            assert probe["fingerprintSha256"] == nginx.served() == _leaf_fingerprint(second)
            assert probe["chainVerified"] and probe["hostnameMatch"]
            assert _deployment(stack)["state"] == "Deployed"

            with http_receiver() as receiver:
                _stale_rule(stack, receiver)
                # Renewed again, and nobody runs the agent: nginx keeps revision 2.
                assert stack.call("POST", "/api/v1/certificates/web/renew/").status == 202
                _revision(stack, 3)
                endpoint = _probed_after(stack, probe["probedAt"])
                assert (endpoint["lastProbe"]["match"], endpoint["lastProbe"]["revision"]) == (
                    "previous",
                    2,
                )
                assert _deployment(stack)["state"] == "Deploying"
                assert receiver.posts == []

                # More than STALE_AFTER later (the database's clock moved, not the default).
                aged = STALE_AFTER + timedelta(hours=1)
                out = stack.django(_AGE.format(seconds=int(aged.total_seconds())), name="age")
                assert "AGED=1" in out
                deployment = _deployment(stack)
                assert deployment["state"] == "Stale"
                assert deployment["stale"] == [endpoint["address"]]

                wait_for(lambda: receiver.posts, timeout=DETECT_INTERVAL + 30, what="the notice")
                # Probe passes and detection passes go on; the episode is reported once.
                started = time.monotonic()
                while time.monotonic() - started < DETECT_INTERVAL + 5:
                    assert _check_now(stack)["lastProbe"]["revision"] == 2
                    assert _deployment(stack)["state"] == "Stale"
                    time.sleep(3)
                [notice] = _bodies(receiver)
                assert notice["condition"] == "endpoint_stale"
                assert notice["subject"] == "Certificate/web"
                assert notice["title"] == "Served certificate stale: web"
                assert notice["body"].startswith(
                    f"{endpoint['address']} (certificate web) still serves revision 2, not the "
                    "current revision 3"
                )
                assert nginx.served() == _leaf_fingerprint(second)
    finally:
        nginx.stop()
    assert nginx.process is not None and nginx.process.popen.returncode is not None
    log = nginx.error_log()
    assert "[emerg]" not in log
    # The agent reloaded nginx twice (revisions 1 and 2), never for revision 3.
    assert log.count("signal 1 (SIGHUP) received") == 2
