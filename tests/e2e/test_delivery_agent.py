"""agent/issuance_agent.py end to end: `manage.py serve` (with its worker) on a private
PostgreSQL server, the agent in a subprocess with only the standard library (`-I -S`: no
site-packages), a forced renewal in between."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.webstack import ServeStack, certificate_body, serve_on_private_postgres
from tests.helpers import wait_for

pytestmark = pytest.mark.e2e

AGENT = Path(__file__).resolve().parents[2] / "agent" / "issuance_agent.py"
FILES = ("tls.crt", "tls.key", "tls-combined.pem")
_TOKEN = """
from issuance.delivery.downloadtokens import create_download_token
from issuance.models import Certificate
_, text = create_download_token("web1 nginx", actor="e2e", certificate=Certificate.objects.get(name="web"))
print("TOKEN=" + text)
"""


def _revision(stack: ServeStack, revision: int) -> None:
    def issued() -> bool:
        answer = stack.call("GET", "/api/v1/certificates/web/")
        return bool(answer.json()["status"]["revision"] == revision)

    wait_for(issued, timeout=60, what=f"revision {revision}")


def _agent(
    stack: ServeStack, out: Path, token_file: Path, *, url: str = ""
) -> subprocess.CompletedProcess[str]:
    reload = f"echo reloaded >> {out.parent / 'reloads.log'}"
    argv = [
        sys.executable,
        "-I",  # isolated: no PYTHONPATH, no user site
        "-S",  # no site-packages: the standard library only
        str(AGENT),
        "--url",
        url or f"http://127.0.0.1:{stack.port}",
        "--certificate",
        "web",
        "--output-dir",
        str(out),
        "--token-file",
        str(token_file),
        "--files",
        ",".join(FILES),
        "--reload-command",
        reload,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _reloads(out: Path) -> int:
    log = out.parent / "reloads.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_agent_fetches_writes_reloads_once_per_change(e2e_workdir: Path) -> None:
    with serve_on_private_postgres(e2e_workdir) as stack:
        body = certificate_body("web")
        body["spec"]["additionalOutputFormats"] = [{"type": "CombinedPEM"}]
        assert stack.call("POST", "/api/v1/certificates/", body).status == 201
        _revision(stack, 1)
        token = stack.django(_TOKEN, name="token").split("TOKEN=", 1)[1].split()[0]
        token_file = e2e_workdir / "token"
        token_file.write_text(token + "\n")
        token_file.chmod(0o600)
        out = e2e_workdir / "tls"

        first = _agent(stack, out, token_file)
        assert first.returncode == 0, first.stderr
        secret = stack.call("GET", "/api/v1/certificates/web/secret/").json()
        assert (out / "tls.crt").read_text() == secret["tls.crt"]
        assert (out / "tls.key").read_text() == secret["tls.key"]
        assert (out / "tls-combined.pem").read_text().startswith(secret["tls.key"].rstrip("\n"))
        assert stat.S_IMODE(os.stat(out / "tls.key").st_mode) == 0o600
        assert stat.S_IMODE(os.stat(out / "tls-combined.pem").st_mode) == 0o600
        assert stat.S_IMODE(os.stat(out / "tls.crt").st_mode) == 0o644
        assert _reloads(out) == 1
        assert token not in first.stdout + first.stderr

        assert stack.call("POST", "/api/v1/certificates/web/renew/").status == 202
        _revision(stack, 2)
        second = _agent(stack, out, token_file)
        assert second.returncode == 0, second.stderr
        renewed = stack.call("GET", "/api/v1/certificates/web/secret/").json()
        assert renewed["tls.crt"] != secret["tls.crt"]
        assert (out / "tls.crt").read_text() == renewed["tls.crt"]
        assert (out / "tls.key").read_text() == renewed["tls.key"]
        assert _reloads(out) == 2

        third = _agent(stack, out, token_file)
        assert third.returncode == 0, third.stderr
        assert "unchanged" in third.stdout
        assert _reloads(out) == 2
        assert sorted(p.name for p in out.iterdir()) == sorted([*FILES, ".issuance-agent.json"])

        bad_file = e2e_workdir / "bad-token"
        bad_file.write_text("not-a-token-" + "x" * 40)
        bad = _agent(stack, out, bad_file)
        assert bad.returncode == 3
        assert "refused the token (401)" in bad.stderr
        assert _reloads(out) == 2
        assert (out / "tls.crt").read_text() == renewed["tls.crt"]

        # https:// to a plain-HTTP port: a TLS handshake error, said as one.
        tls = _agent(stack, out, token_file, url=f"https://127.0.0.1:{stack.port}")
        assert tls.returncode == 4
        assert "TLS error" in tls.stderr and "--ca-bundle" in tls.stderr

        events = stack.call("GET", "/api/v1/events/?certificate=web&limit=200").json()
        rows = events["results"] if isinstance(events, dict) else events
        downloads = [e for e in rows if e["reason"] == "Downloaded"]
        assert len(downloads) == 2 * len(FILES)
        assert all("'web1 nginx'" in e["message"] for e in downloads)
