"""A private PostgreSQL server for outage tests and benchmarks: stop it, start it again.

Outage scenarios must stop the database under a running web app or worker. The shared
server (127.0.0.1:5432, `pg_ctlcluster`) serves other test runs and other people's work at
the same time, so stopping it would break them; each scenario gets its own throw-away
cluster instead, made with Debian's PostgreSQL binaries, on a free loopback port:

    with private_postgres(workdir) as pg:       # initdb, start, CREATE DATABASE
        env = {"DATABASE_URL": pg.url}
        ...
        pg.stop()        # fast shutdown, as `pg_ctlcluster <ver> main stop` does
        pg.start()       # same port, same data
        pg.kill()        # SIGKILL to every process of the server (a crash, an OOM kill)
        pg.start()
    # stopped and deleted here, whatever happened

Plain helpers (no pytest imports), like tests/e2e/servers.py. PostgreSQL refuses to run as
root, so as root the server runs as the `postgres` system user in a directory that
user owns; as any other user it runs as that user. Authentication is `trust` on 127.0.0.1
only. The server's log is copied to <workdir>/postgres.log when it is cleaned up.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.servers import free_port

PG_ROOT = Path("/usr/lib/postgresql")
SERVICE_USER = "postgres"


def postgres_bindir() -> Path:
    """The newest installed server's bin directory (/usr/lib/postgresql/<ver>/bin)."""
    versions = sorted(
        (p for p in PG_ROOT.glob("*/bin/postgres") if p.parent.parent.name.isdigit()),
        key=lambda p: int(p.parent.parent.name),
    )
    if not versions:
        raise RuntimeError(f"no PostgreSQL server binaries under {PG_ROOT}")
    return versions[-1].parent


def _as_service_user() -> dict[str, Any]:
    """Popen arguments that run the child as the postgres user when we are root (PostgreSQL
    refuses root). The child is the server itself (no runuser/su in between), so its pid is
    the postmaster's and signals reach it directly."""
    if os.geteuid() != 0:
        return {}
    entry = pwd.getpwnam(SERVICE_USER)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _give_to_service_user(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVICE_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@dataclass
class PgServer:
    """One private cluster. `url` is a DATABASE_URL for its database."""

    root: Path  # owned by the server's user: data/, the log
    port: int
    dbname: str
    bindir: Path
    workdir: Path | None = None
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        return self.root / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgresql://{SERVICE_USER}@127.0.0.1:{self.port}/{self.dbname}"

    @property
    def admin_url(self) -> str:
        return f"postgresql://{SERVICE_USER}@127.0.0.1:{self.port}/postgres"

    def running(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    # -- lifecycle ------------------------------------------------------------------

    def init(self) -> None:
        """initdb: trust authentication, UTF-8, no fsync at init (a throw-away cluster)."""
        argv = [
            str(self.bindir / "initdb"),
            "-D",
            str(self.datadir),
            "-U",
            SERVICE_USER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
        ]
        self._run(argv)

    def _run(self, argv: list[str]) -> None:
        """One PostgreSQL tool as the service user, its output appended to the server log."""
        with self.log_path.open("ab") as log:
            subprocess.run(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                check=True,
                cwd=self.root,
                **_as_service_user(),
            )

    def start(self, timeout: float = 30) -> None:
        """Start the server (again) on the same port and data; return once it answers.

        Its own session (process group), so kill() reaches the postmaster and every backend.
        """
        if self.running():
            raise RuntimeError("the private PostgreSQL server is already running")
        argv = [
            str(self.bindir / "postgres"),
            "-D",
            str(self.datadir),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f"port={self.port}",
            "-c",
            f"unix_socket_directories={self.root}",
            # A process kill leaves the page cache intact, so nothing is lost without fsync;
            # it spares the machine's disk (other runs share it).
            "-c",
            "fsync=off",
        ]
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                cwd=self.root,
                **_as_service_user(),
            )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = 30) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if not self.running():
                raise RuntimeError(f"PostgreSQL exited while starting:\n{self.log()[-3000:]}")
            try:
                with psycopg.connect(self.admin_url, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error as exc:  # starting up, or not listening yet
                last = exc
            time.sleep(0.05)
        raise TimeoutError(f"PostgreSQL not ready after {timeout}s ({last}):\n{self.log()[-3000:]}")

    def create_database(self) -> None:
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{self.dbname}"')

    def stop(self, mode: str = "fast", timeout: float = 60) -> None:
        """pg_ctl stop -m <mode> and wait: `fast` (what pg_ctlcluster stop does) disconnects
        every client and shuts down cleanly; `immediate` quits without a checkpoint."""
        if not self.running():
            return
        argv = [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.datadir), "-m", mode, "-w"]
        argv += ["-t", str(int(timeout))]
        self._run(argv)
        self._wait_exit(timeout)

    def kill(self) -> None:
        """SIGKILL to the postmaster and every backend at once: no goodbye to any client."""
        if self._popen is None or self._popen.poll() is not None:
            return
        # Every child of the postmaster calls setsid() (InitPostmasterChild), so the
        # backends are not in its process group: each gets its own SIGKILL. One left
        # attached to the shared memory makes the next start() refuse ("pre-existing shared
        # memory block is still in use"), which a loaded machine showed.
        # Stopped first, the postmaster forks no new one while its children are listed.
        with contextlib.suppress(ProcessLookupError):
            os.kill(self._popen.pid, signal.SIGSTOP)
        children = _children(self._popen.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._popen.pid, signal.SIGKILL)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self._wait_exit(30)
        _wait_gone(children, 30)

    def _wait_exit(self, timeout: float) -> None:
        assert self._popen is not None
        try:
            self._popen.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._popen.pid, signal.SIGKILL)
            self._popen.wait(10)

    def cleanup(self) -> None:
        """Kill the server if it runs, keep its log in `workdir`, delete its files."""
        self.kill()
        if self.workdir is not None:
            with contextlib.suppress(OSError):
                self.workdir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(self.log_path, self.workdir / "postgres.log")
        shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


def _stat_fields(pid_dir: Path) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name, or None once it has exited."""
    try:
        return (pid_dir / "stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def _children(parent: int) -> list[int]:
    """The processes whose parent is `parent` (the postmaster's backends and helpers)."""
    found = []
    for pid_dir in Path("/proc").glob("[0-9]*"):
        fields = _stat_fields(pid_dir)
        if fields is not None and int(fields[1]) == parent:
            found.append(int(pid_dir.name))
    return found


def _wait_gone(pids: list[int], timeout: float) -> None:
    """Until none of `pids` runs (a zombie has let go of its memory, so it does not count)."""

    def running() -> list[int]:
        return [
            pid
            for pid in pids
            if (fields := _stat_fields(Path(f"/proc/{pid}"))) is not None and fields[0] != "Z"
        ]

    deadline = time.monotonic() + timeout
    while running():
        if time.monotonic() > deadline:
            raise TimeoutError(f"processes of the killed PostgreSQL still run: {running()}")
        time.sleep(0.02)


def start_postgres(workdir: Path | None = None, dbname: str = "issuance") -> PgServer:
    """initdb a new cluster in a temporary directory, start it, create `dbname`.

    The caller must call cleanup() (private_postgres() does); an exit handler also kills
    and deletes it if the process ends first.
    """
    root = Path(tempfile.mkdtemp(prefix="pgserver-"))
    _give_to_service_user(root)  # mkdtemp makes it 0700: the server's user must own it
    server = PgServer(root=root, port=free_port(), dbname=dbname, bindir=postgres_bindir())
    server.workdir = workdir
    atexit.register(server.cleanup)
    try:
        server.init()
        server.start()
        server.create_database()
    except BaseException:
        server.cleanup()
        atexit.unregister(server.cleanup)
        raise
    return server


@contextlib.contextmanager
def private_postgres(workdir: Path | None = None, dbname: str = "issuance") -> Iterator[PgServer]:
    """A private PostgreSQL server for the block; killed and deleted afterwards."""
    server = start_postgres(workdir, dbname)
    try:
        yield server
    finally:
        server.cleanup()
        atexit.unregister(server.cleanup)


if __name__ == "__main__":  # manual smoke: python tests/e2e/pgserver.py
    import psycopg

    with private_postgres() as pg:
        print(pg.url)
        with psycopg.connect(pg.url) as c:
            print(c.execute("SELECT version()").fetchone())
        pg.stop()
        pg.start()
        pg.kill()
        pg.start()
        with psycopg.connect(pg.url) as c:
            print(c.execute("SELECT 1").fetchone())
