"""deploy/systemd/: the units load and name binaries that exist, as `systemd-analyze verify`
sees them in a root of their own (a copy of the machine's system units, the console's units
in /etc/systemd/system, the commands installed where the units say)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "deploy" / "systemd"
CONSOLE_BIN = "opt/issuance-console/bin/issuance-console"
AGENT_BIN = "usr/local/bin/issuance-agent"
# Templates are verified through an instance.
CHECKED = [
    "issuance-console-web.service",
    "issuance-console-worker.service",
    "issuance-agent@web.service",
    "issuance-agent@web.timer",
]


def _verify(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", "verify", f"--root={root}", *CHECKED],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def unit_root(tmp_path: Path) -> Path:
    # The machine's own units (targets such as sysinit.target that ours pull in).
    shutil.copytree("/usr/lib/systemd/system", tmp_path / "usr/lib/systemd/system", symlinks=True)
    target = tmp_path / "etc/systemd/system"
    target.mkdir(parents=True)
    for unit in UNITS.iterdir():
        shutil.copy(unit, target / unit.name)
    return tmp_path


def _install_console_script(root: Path) -> Path:
    """What `pip install` of the wheel into /opt/issuance-console writes for the
    [project.scripts] entry (tests/e2e/test_wheel_install.py installs the real one)."""
    script = root / CONSOLE_BIN
    script.parent.mkdir(parents=True)
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom console.entry_point import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


def _install_agent(root: Path) -> Path:
    """docs/delivery.md's `install -m 0755 issuance_agent.py /usr/local/bin/issuance-agent`."""
    agent = root / AGENT_BIN
    agent.parent.mkdir(parents=True)
    shutil.copy(ROOT / "agent" / "issuance_agent.py", agent)
    agent.chmod(0o755)
    return agent


def test_the_units_in_the_repository_are_the_ones_checked() -> None:
    assert sorted(p.name for p in UNITS.iterdir()) == [
        "issuance-agent@.service",
        "issuance-agent@.timer",
        "issuance-console-web.service",
        "issuance-console-worker.service",
    ]


def test_verify_fails_while_the_commands_are_missing(unit_root: Path) -> None:
    result = _verify(unit_root)
    assert result.returncode != 0
    assert f"Command /{CONSOLE_BIN} is not executable" in result.stderr
    assert f"Command /{AGENT_BIN} is not executable" in result.stderr


def test_the_units_verify_with_the_commands_installed(unit_root: Path) -> None:
    console = _install_console_script(unit_root)
    agent = _install_agent(unit_root)
    result = _verify(unit_root)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    # The installed commands run.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    version = subprocess.run(
        [str(console), "--version"], capture_output=True, text=True, env=env, check=True
    )
    assert version.stdout.startswith("issuance-console ")
    usage = subprocess.run([str(agent), "--help"], capture_output=True, text=True, check=True)
    assert "--certificate" in usage.stdout


def test_the_web_unit_runs_serve_without_the_worker_and_the_worker_unit_reconcile() -> None:
    web = (UNITS / "issuance-console-web.service").read_text()
    worker = (UNITS / "issuance-console-worker.service").read_text()
    assert f"ExecStart=/{CONSOLE_BIN} serve --no-worker " in web
    assert f"ExecStart=/{CONSOLE_BIN} reconcile\n" in worker
    for unit in (web, worker):
        assert "User=issuance-console" in unit and "NoNewPrivileges=yes" in unit
