"""Backup and restore as docs/deploying.md says: `pg_dump -Fc` of a populated database and
the KEY_ENCRYPTION_KEY kept beside it; `pg_restore` into a new database; `verify_secrets`
refuses a wrong key, saying so and changing nothing; with the right key every certificate,
private key (decrypted) and timeline entry is there, and a console started on the restored
database serves them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import psycopg
import pytest
from cryptography.fernet import Fernet

from tests.e2e.servers import free_port, manage_py, wait_for_tcp
from tests.e2e.webstack import ServeStack, certificate_body, serve_on_private_postgres
from tests.helpers import wait_for

pytestmark = pytest.mark.e2e

NAMES = ("alpha", "beta", "gamma")

# What must survive, as one JSON document: certificates, their keys decrypted (digests, so
# no key reaches the log), every timeline entry.
_STATE = """
import hashlib, json
from issuance.models import Certificate, Event, Secret
print("STATE=" + json.dumps({
    "certificates": sorted(
        [c.name, c.state, c.revision, c.not_after]
        for c in Certificate.objects.all()
    ),
    "keys": {
        s.name: hashlib.sha256(s.tls_key.encode()).hexdigest()
        for s in Secret.objects.all()
    },
    "certs": {s.name: hashlib.sha256(s.tls_crt.encode()).hexdigest() for s in Secret.objects.all()},
    "events": [
        [e.pk, e.kind, e.name, e.reason, e.message, e.created_at.isoformat()]
        for e in Event.objects.order_by("pk")
    ],
}, default=str))
"""


def _state(stack: ServeStack, env: dict[str, str]) -> dict[str, object]:
    proc = manage_py(stack.workdir, ["shell", "-c", _STATE], env, name="state")
    assert proc.popen.wait(120) == 0, proc.log()[-3000:]
    return dict(json.loads(proc.log().split("STATE=", 1)[1].splitlines()[0]))


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


def _plain_dump(stack: ServeStack, url: str) -> str:
    dump = _run([str(stack.pg.bindir / "pg_dump"), "--dbname", url, "--no-comments"])
    assert dump.returncode == 0, dump.stderr
    # pg_dump's \restrict / \unrestrict lines carry a random key on every run.
    return "".join(
        line for line in dump.stdout.splitlines(keepends=True) if not line.startswith("\\")
    )


def test_a_dump_restores_with_its_key_and_a_wrong_key_is_refused(e2e_workdir: Path) -> None:
    with serve_on_private_postgres(e2e_workdir) as stack:
        for name in NAMES:
            assert stack.call("POST", "/api/v1/certificates/", certificate_body(name)).status == 201

        def all_issued() -> bool:
            certs = stack.call("GET", "/api/v1/certificates/").json()["results"]
            return sorted(c["name"] for c in certs if c["status"].get("revision") == 1) == list(
                NAMES
            )

        wait_for(all_issued, timeout=90, what="three certificates issued")
        stack.serve.stop(timeout=30)  # a quiet database: the dump is the state compared
        before = _state(stack, stack.env)
        assert len(before["keys"]) == len(NAMES)  # type: ignore[arg-type]
        assert before["events"]

        # The backup: a custom-format dump (the key is kept apart from it, by the operator).
        backup = e2e_workdir / "console.dump"
        dumped = _run(
            [str(stack.pg.bindir / "pg_dump"), "-Fc", "--dbname", stack.pg.url, "-f", str(backup)]
        )
        assert dumped.returncode == 0, dumped.stderr

        # The restore, into a new database.
        with psycopg.connect(stack.pg.admin_url, autocommit=True) as conn:
            conn.execute('CREATE DATABASE "restored"')
        restored_url = stack.pg.url.rsplit("/", 1)[0] + "/restored"
        restored = _run(
            [
                str(stack.pg.bindir / "pg_restore"),
                "--no-owner",
                "--exit-on-error",
                "--dbname",
                restored_url,
                str(backup),
            ]
        )
        assert restored.returncode == 0, restored.stderr
        env = {**stack.env, "DATABASE_URL": restored_url}

        # With a wrong key: refused, clearly, and the restored database is unchanged.
        untouched = _plain_dump(stack, restored_url)
        wrong = {**env, "KEY_ENCRYPTION_KEY": Fernet.generate_key().decode()}
        check = manage_py(e2e_workdir, ["verify_secrets"], wrong, name="verify-wrong")
        assert check.popen.wait(120) == 1
        message = check.log()
        assert "KEY_ENCRYPTION_KEY does not decrypt" in message
        assert "Secret.tls_key_ciphertext: 3" in message
        assert "nothing was changed" in message
        assert _plain_dump(stack, restored_url) == untouched

        # With the key kept with the backup: everything is there.
        check = manage_py(e2e_workdir, ["verify_secrets"], env, name="verify-right")
        assert check.popen.wait(120) == 0, check.log()
        assert "ok: KEY_ENCRYPTION_KEY decrypts all" in check.log()
        assert _state(stack, env) == before

        # A console started on the restored database serves them.
        port = free_port()
        serve = manage_py(
            e2e_workdir, ["serve", "--no-worker", "--port", str(port)], env, name="serve-restored"
        )
        try:
            wait_for_tcp("127.0.0.1", port, timeout=60, process=serve)
            served = ServeStack(stack.pg, serve, port, stack.token, stack.session, env, e2e_workdir)
            assert served.call("GET", "/readyz").status == 200
            certs = served.call("GET", "/api/v1/certificates/").json()["results"]
            assert sorted(c["name"] for c in certs) == list(NAMES)
            for name in NAMES:
                answer = served.call("GET", f"/api/v1/certificates/{name}/")
                assert answer.status == 200 and answer.json()["status"]["revision"] == 1
        finally:
            serve.stop()
