"""agent/issuance_agent.py without a console: usage errors and an unreachable console exit
non-zero with a message (the end-to-end run is tests/e2e/test_delivery_agent.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.servers import free_port

AGENT = Path(__file__).resolve().parents[2] / "agent" / "issuance_agent.py"


def _run(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-I", "-S", str(AGENT), "--certificate", "web"]
    argv += ["--output-dir", str(tmp_path / "out"), *args]
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, env=env or {}, check=False
    )


def test_no_token_is_a_usage_error(tmp_path: Path) -> None:
    result = _run(tmp_path, "--url", "http://127.0.0.1:9")
    assert result.returncode == 2
    assert "no token: give --token-file or set ISSUANCE_TOKEN" in result.stderr
    missing = _run(tmp_path, "--url", "http://127.0.0.1:9", "--token-file", str(tmp_path / "none"))
    assert missing.returncode == 2 and "cannot read the token file" in missing.stderr


def test_a_bad_url_and_an_unreachable_console(tmp_path: Path) -> None:
    env = {"ISSUANCE_TOKEN": "t" * 43}
    assert _run(tmp_path, "--url", "file:///etc/passwd", env=env).returncode == 2
    down = _run(tmp_path, "--url", f"http://127.0.0.1:{free_port()}", env=env)
    assert down.returncode == 5
    assert "cannot reach the console" in down.stderr
    assert "t" * 43 not in down.stderr + down.stdout
    assert not (tmp_path / "out" / "tls.crt").exists()
