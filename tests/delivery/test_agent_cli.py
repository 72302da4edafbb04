"""agent/issuance_agent.py without a console: usage errors and an unreachable console exit
non-zero with a message (the end-to-end run is tests/e2e/test_delivery_agent.py)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC
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


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    import ipaddress
    from datetime import datetime, timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "console.test")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "console.crt", tmp_path / "console.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_a_private_ca_needs_ca_bundle(tmp_path: Path) -> None:
    """A real HTTPS server with a self-signed certificate: refused as a TLS error (exit 4)
    until --ca-bundle names it, then the file is fetched."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    cert_path, key_path = _self_signed(tmp_path)
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(f"{self.path} {self.headers.get('Authorization')}")
            body = b"-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n"
            self.send_response(200)
            self.send_header("ETag", '"1-ab-tls.crt"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"https://127.0.0.1:{server.server_address[1]}"
        env = {"ISSUANCE_TOKEN": "tok-" + "x" * 40}
        refused = _run(tmp_path, "--url", url, "--files", "tls.crt", env=env)
        assert refused.returncode == 4, refused.stderr
        assert "TLS error" in refused.stderr and "CERTIFICATE_VERIFY_FAILED" in refused.stderr
        assert seen == []
        trusted = _run(
            tmp_path, "--url", url, "--files", "tls.crt", "--ca-bundle", str(cert_path), env=env
        )
        assert trusted.returncode == 0, trusted.stderr
        assert (tmp_path / "out" / "tls.crt").read_bytes().startswith(b"-----BEGIN CERTIFICATE")
        assert seen == [f"/download/web/tls.crt Bearer tok-{'x' * 40}"]
    finally:
        server.shutdown()
        server.server_close()
