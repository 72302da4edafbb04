import os
import time
from pathlib import Path
from tests.contract.test_schemathesis import served, run_schemathesis, pytestmark  # noqa


def test_timing(served, tmp_path: Path) -> None:
    for label in os.environ["ST_RUNS"].split(";"):
        args = label.split()
        t = time.monotonic()
        run = run_schemathesis(served, f"Token {served.credentials.admin_token}", args, tmp_path)
        with open("/tmp/st_runs.txt", "a") as f:
            f.write(f"{label}: {time.monotonic()-t:.1f}s rc={run.returncode} {sum(run.statuses.values())} responses\n")
