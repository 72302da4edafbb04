#!/usr/bin/env python3
"""Issuance Console agent: keeps a certificate's files on this server up to date.

Standard library only (Python >= 3.9), so it runs where the console's dependencies are
not installed. One run: for each requested file, GET /download/<certificate>/<file> with
the scoped download token and the ETag of the copy on disk (If-None-Match); a 200 is
written atomically (temporary file, fsync, rename; files holding the key 0600), a 304
leaves the file alone. When any file changed, the reload command runs once. Run it from a
systemd timer (see docs/delivery.md, "The agent").

The token comes from --token-file or the ISSUANCE_TOKEN environment variable, never from
the command line (it would show in `ps` and shell history).

Exit status: 0 done (changed or not), 2 usage, 3 bad token (401/403), 4 TLS error,
5 other HTTP or network error, 6 the reload command failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_FILES = ("tls.crt", "tls.key", "ca.crt")
KEY_FILES = frozenset({"tls.key", "tls-combined.pem", "key.der", "keystore.p12", "keystore.jks"})
STATE_FILE = ".issuance-agent.json"
TIMEOUT = 30.0

EXIT_OK, EXIT_USAGE, EXIT_TOKEN, EXIT_TLS, EXIT_HTTP, EXIT_RELOAD = 0, 2, 3, 4, 5, 6


class AgentError(Exception):
    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Fetch a certificate's key pair from Issuance Console with a scoped token."
    )
    parser.add_argument("--url", required=True, help="console URL, e.g. https://console.example")
    parser.add_argument("--certificate", required=True, help="the Certificate's name")
    parser.add_argument("--output-dir", required=True, help="where the files are written")
    parser.add_argument(
        "--token-file",
        help="file holding the download token (else the ISSUANCE_TOKEN environment variable)",
    )
    parser.add_argument(
        "--files",
        default=",".join(DEFAULT_FILES),
        help="comma-separated: tls.crt, tls.key, ca.crt, tls-combined.pem, key.der, tls.der, "
        "keystore.p12, truststore.p12, keystore.jks, truststore.jks (default: %(default)s)",
    )
    parser.add_argument("--reload-command", help="run (through the shell) when a file changed")
    parser.add_argument("--ca-bundle", help="CA certificates to verify the console's TLS with")
    return parser.parse_args(argv)


def read_token(args: argparse.Namespace) -> str:
    if args.token_file:
        try:
            with open(args.token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise AgentError(f"cannot read the token file: {exc}", EXIT_USAGE) from None
    else:
        token = os.environ.get("ISSUANCE_TOKEN", "").strip()
    if not token:
        raise AgentError("no token: give --token-file or set ISSUANCE_TOKEN", EXIT_USAGE)
    return token


def load_state(directory: str) -> dict[str, str]:
    try:
        with open(os.path.join(directory, STATE_FILE), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return (
        {str(k): str(v) for k, v in data.get("etags", {}).items()} if isinstance(data, dict) else {}
    )


def write_atomically(path: str, data: bytes, mode: int) -> None:
    """A reader sees the old file or the new one, never half of one; survives a crash."""
    directory = os.path.dirname(path) or "."
    fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # the rename itself
    finally:
        os.close(dir_fd)


def fetch(
    url: str, token: str, etag: str | None, context: ssl.SSLContext | None
) -> tuple[int, bytes, str]:
    """(status, body, etag); 304 has an empty body."""
    headers = {"Authorization": f"Bearer {token}", "User-Agent": "issuance-agent/1"}
    if etag:
        headers["If-None-Match"] = etag
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:
            return response.status, response.read(), response.headers.get("ETag", "")
    except urllib.error.HTTPError as exc:
        if exc.code == 304:
            return 304, b"", exc.headers.get("ETag", "") or (etag or "")
        detail = exc.read(500).decode("utf-8", "replace").strip()
        if exc.code in (401, 403):
            raise AgentError(
                f"the console refused the token ({exc.code}): {detail or exc.reason}; "
                "is it revoked or mistyped?",
                EXIT_TOKEN,
            ) from None
        raise AgentError(f"{url}: HTTP {exc.code}: {detail or exc.reason}", EXIT_HTTP) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ssl.SSLError):
            raise AgentError(
                f"TLS error talking to the console: {reason}; "
                "give --ca-bundle if it uses a private CA",
                EXIT_TLS,
            ) from None
        raise AgentError(f"cannot reach the console: {reason}", EXIT_HTTP) from None
    except ssl.SSLError as exc:
        raise AgentError(f"TLS error talking to the console: {exc}", EXIT_TLS) from None
    except OSError as exc:
        raise AgentError(f"cannot reach the console: {exc}", EXIT_HTTP) from None


def run(args: argparse.Namespace) -> int:
    if not args.url.startswith(("http://", "https://")):
        raise AgentError("--url must start with https:// (or http://)", EXIT_USAGE)
    token = read_token(args)
    files = [name.strip() for name in args.files.split(",") if name.strip()]
    if not files or any("/" in name or name.startswith(".") for name in files):
        raise AgentError("--files: comma-separated file names", EXIT_USAGE)
    context = None
    if args.url.startswith("https:"):
        try:
            context = ssl.create_default_context(cafile=args.ca_bundle)
        except (OSError, ssl.SSLError) as exc:
            raise AgentError(f"cannot load --ca-bundle: {exc}", EXIT_USAGE) from None
    os.makedirs(args.output_dir, mode=0o755, exist_ok=True)
    state = load_state(args.output_dir)
    base = args.url.rstrip("/") + "/download/" + urllib.parse.quote(args.certificate, safe="")
    # Fetch everything first: a failure halfway leaves every file as it was.
    fetched: dict[str, tuple[bytes, str]] = {}
    for name in files:
        path = os.path.join(args.output_dir, name)
        etag = state.get(name) if os.path.exists(path) else None
        status, body, new_etag = fetch(f"{base}/{urllib.parse.quote(name)}", token, etag, context)
        if status == 200:
            fetched[name] = (body, new_etag)
    for name, (body, new_etag) in fetched.items():
        mode = 0o600 if name in KEY_FILES else 0o644
        write_atomically(os.path.join(args.output_dir, name), body, mode)
        state[name] = new_etag
    if not fetched:
        print(f"{args.certificate}: unchanged")
        return EXIT_OK
    print(f"{args.certificate}: wrote {', '.join(sorted(fetched))}")
    if args.reload_command:
        result = subprocess.run(args.reload_command, shell=True, check=False)  # noqa: S602
        if result.returncode != 0:
            raise AgentError(
                f"the reload command failed (exit {result.returncode}): "
                f"{shlex.quote(args.reload_command)}",
                EXIT_RELOAD,
            )
        print(f"{args.certificate}: reload command ran")
    # Last: after a failed reload the ETags stay old, so the next run fetches and reloads again.
    write_atomically(
        os.path.join(args.output_dir, STATE_FILE),
        json.dumps({"etags": state}, indent=1, sort_keys=True).encode(),
        0o600,
    )
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except AgentError as exc:
        print(f"issuance-agent: error: {exc}", file=sys.stderr)
        return exc.code


if __name__ == "__main__":
    sys.exit(main())
