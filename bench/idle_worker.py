"""How much CPU does an idle `manage.py reconcile` use? It should be next to nothing: the worker
sleeps on NOTIFY (SQLite: PRAGMA data_version), not a busy poll (docs/decisions/0001).

    .venv/bin/python bench/idle_worker.py [--seconds 20]            # temporary SQLite DB
    DATABASE_URL=postgresql://postgres@127.0.0.1:5432/bench .venv/bin/python bench/idle_worker.py

Starts the worker, waits until it has started (past imports and its first pass), then
measures user+system CPU time from /proc/<pid>/stat over the idle window.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # after the ")": state is field 3, utime 14 and stime 15 (1-based) → indexes 11, 12
    return (int(fields[11]) + int(fields[12])) / TICKS


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    env = dict(os.environ)
    env.setdefault("KEY_ENCRYPTION_KEY", "6v2yQWZ1aH1m0Vn3m4bC8Kk0mJtq1o4c4Yq0lYbV1xk=")
    env.setdefault("SECRET_KEY", "bench-only-not-secret")
    tmp = None
    if not env.get("DATABASE_URL"):
        tmp = tempfile.TemporaryDirectory()
        env["DATABASE_URL"] = f"sqlite:///{tmp.name}/idle.sqlite3"
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, check=True, cwd=ROOT)
    proc = subprocess.Popen(
        [*manage, "reconcile", "--threads", "2"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # "worker … running": imports and setup are done
        time.sleep(1.0)  # first pass and first next-due query
        start = cpu_seconds(proc.pid)
        t0 = time.monotonic()
        time.sleep(args.seconds)
        used = cpu_seconds(proc.pid) - start
        elapsed = time.monotonic() - t0
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
        if tmp is not None:
            tmp.cleanup()
    vendor = env["DATABASE_URL"].split(":", 1)[0]
    print(
        f"idle worker ({vendor}): {used:.3f} CPU s over {elapsed:.1f} s "
        f"= {100 * used / elapsed:.2f} % of one core; exit code {proc.returncode}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
