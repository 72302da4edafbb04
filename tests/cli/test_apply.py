"""`manage.py apply -f`: cert-manager manifests in, kubectl-style lines out, all or nothing."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from issuance.models import Certificate, Event, Issuer, Secret

MANIFEST = """\
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: web
  namespace: default
spec:
  secretName: web-tls
  duration: 720h
  renewBefore: 240h
  dnsNames:
    - web.example.test
    - WWW.example.test
  issuerRef:
    name: internal-ca
    kind: ClusterIssuer
    group: cert-manager.io
  privateKey:
    algorithm: ECDSA
    size: 256
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata:
  name: internal-ca
  labels: {team: platform}
spec:
  ca:
    generate: true
    commonName: Internal CA
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: selfsigned
spec:
  selfSigned: {}
"""


def run(path: Path | str, *args: str, stdin: str | None = None) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        old = sys.stdin
        sys.stdin = io.StringIO(stdin)
        try:
            call_command("apply", "-f", "-", *args, stdout=out, stderr=err)
        finally:
            sys.stdin = old
    else:
        call_command("apply", "-f", str(path), *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    path = tmp_path / "certs.yaml"
    path.write_text(MANIFEST)
    return path


def test_apply_creates_issuers_first_then_certificates(db: None, manifest: Path) -> None:
    out, err = run(manifest, "--as", "alice")
    assert out.splitlines() == [
        "clusterissuer.cert-manager.io/internal-ca created",
        "issuer.cert-manager.io/selfsigned created",
        "certificate.cert-manager.io/web created",
    ]
    assert "document 1 (Certificate/web): metadata.namespace ignored" in err
    issuer = Issuer.objects.get(name="internal-ca")
    assert issuer.cluster_scoped and issuer.kind == "ca"
    assert Secret.objects.filter(name="internal-ca-ca").exists()
    cert = Certificate.objects.get(name="web")
    assert cert.issuer == issuer and cert.secret_name == "web-tls"
    assert cert.spec["dnsNames"] == ["web.example.test", "www.example.test"]
    assert cert.spec["duration"] == "720h0m0s"
    assert Event.objects.get(name="web", reason="Created").actor == "alice"


def test_reapply_is_unchanged_and_edits_are_configured(db: None, manifest: Path) -> None:
    run(manifest)
    out, _ = run(manifest)
    assert out.split() == [
        "clusterissuer.cert-manager.io/internal-ca",
        "unchanged",
        "issuer.cert-manager.io/selfsigned",
        "unchanged",
        "certificate.cert-manager.io/web",
        "unchanged",
    ]
    edited = MANIFEST.replace("renewBefore: 240h", "renewBeforePercentage: 30")
    out, _ = run("-", stdin=edited)
    assert "certificate.cert-manager.io/web configured" in out
    assert "issuer.cert-manager.io/selfsigned unchanged" in out
    cert = Certificate.objects.get(name="web")
    assert cert.generation == 2 and cert.spec["renewBeforePercentage"] == 30
    assert "renewBefore" not in cert.spec


def _expect_failure(text: str, tmp_path: Path) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(CommandError) as info:
        run(path)
    assert info.value.returncode == 1
    return str(info.value)


@pytest.mark.parametrize(
    ("replace", "with_", "message"),
    [
        (
            "  secretName: web-tls\n",
            "  secretName: web-tls\n  literalSubject: CN=web\n",
            "document 1 (Certificate/web): spec.literalSubject: unsupported field",
        ),
        (
            "kind: Issuer\n",
            "kind: Vault\n",
            "document 3 (Vault/selfsigned): kind: unsupported kind 'Vault'",
        ),
        (
            "apiVersion: cert-manager.io/v1\nkind: Issuer",
            "apiVersion: v1\nkind: Issuer",
            "apiVersion: must be cert-manager.io/v1",
        ),
        (
            "  name: selfsigned\n",
            "  namespace: x\n",
            "document 3 (Issuer/?): metadata.name: is required",
        ),
        ("    - WWW.example.test\n", "    - web.example.test\n", "spec.dnsNames[1]: duplicate"),
        (
            "    name: internal-ca\n",
            "    name: other-ca\n",
            "spec.issuerRef.name: unknown issuer 'other-ca'",
        ),
        (
            "  selfSigned: {}\n",
            "  selfSigned: {}\nstatus: {}\nextra: 1\n",
            "document 3 (Issuer/selfsigned): extra: unsupported field",
        ),
        (
            "  name: selfsigned\n",
            "  name: internal-ca\n",
            "metadata.name: also defined in document 2",
        ),
    ],
)
def test_any_invalid_document_applies_nothing(
    db: None, tmp_path: Path, replace: str, with_: str, message: str
) -> None:
    assert replace in MANIFEST
    text = MANIFEST.replace(replace, with_, 1)
    error = _expect_failure(text, tmp_path)
    assert error.startswith("nothing applied")
    assert message in error
    assert Issuer.objects.count() == 0
    assert Certificate.objects.count() == 0
    assert Secret.objects.count() == 0
    assert Event.objects.count() == 0


def test_invalid_yaml_and_empty_file(db: None, tmp_path: Path) -> None:
    assert "invalid YAML" in _expect_failure("a: [unclosed", tmp_path)
    assert "no documents" in _expect_failure("---\n", tmp_path)
    with pytest.raises(CommandError) as info:
        run(tmp_path / "missing.yaml")
    assert "cannot read" in str(info.value)


def test_dry_run_changes_nothing(db: None, manifest: Path) -> None:
    out, _ = run(manifest, "--dry-run")
    assert "certificate.cert-manager.io/web valid (dry run)" in out
    assert Issuer.objects.count() == 0 and Certificate.objects.count() == 0


def test_exit_code_and_stderr_of_the_real_command(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: cert-manager.io/v1\nkind: Secret\nmetadata: {name: x}\nspec: {}\n")
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'unused.sqlite3'}"}
    env.setdefault("KEY_ENCRYPTION_KEY", "6v2yQWZ1aH1m0Vn3m4bC8Kk0mJtq1o4c4Yq0lYbV1xk=")
    env.setdefault("SECRET_KEY", "test")
    result = subprocess.run(
        [sys.executable, "manage.py", "apply", "-f", str(path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[2],
        timeout=120,
        check=False,
    )
    assert result.returncode == 1
    assert "document 1 (Secret/x): kind: unsupported kind 'Secret'" in result.stderr
    assert result.stdout == ""


LABELLED = """\
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: selfsigned
spec:
  selfSigned: {}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: labelled
  labels:
    team: payments
    app.kubernetes.io/part-of: shop
spec:
  dnsNames: [labelled.example.test]
  issuerRef: {name: selfsigned}
"""


def _issue(cert: Certificate) -> None:
    """Drive the certificate and its requests as the worker would, until it is Ready."""
    from tests.controllers.helpers import requests_of, step, step_request

    for _ in range(6):
        step(cert)
        for request in requests_of(cert):
            step_request(request)
        cert.refresh_from_db()
        if cert.condition_is("Ready"):
            return
    raise AssertionError(cert.conditions)


def test_apply_keeps_certificate_labels_and_a_label_change_issues_nothing(db: None) -> None:
    from issuance.models import CertificateRequest

    out, _ = run("-", stdin=LABELLED)
    assert "certificate.cert-manager.io/labelled created" in out
    cert = Certificate.objects.get(name="labelled")
    assert cert.labels == {"app.kubernetes.io/part-of": "shop", "team": "payments"}
    _issue(cert)
    requests = CertificateRequest.objects.filter(certificate=cert).count()
    assert requests == 1

    out, _ = run("-", stdin=LABELLED)
    assert "certificate.cert-manager.io/labelled unchanged" in out

    out, _ = run("-", stdin=LABELLED.replace("team: payments", "team: billing"))
    assert "certificate.cert-manager.io/labelled configured" in out
    cert.refresh_from_db()
    assert cert.labels["team"] == "billing"
    assert cert.generation == 1  # labels are not spec
    changed = Event.objects.get(name="labelled", reason="LabelsChanged")
    assert "team" in changed.message
    _issue(cert)  # still Ready, and no new request was made
    assert CertificateRequest.objects.filter(certificate=cert).count() == requests

    # Labels left out of the manifest: the Certificate has none (the manifest is the truth).
    unlabelled = LABELLED.replace(
        "  labels:\n    team: payments\n    app.kubernetes.io/part-of: shop\n", ""
    )
    assert "labels" not in unlabelled
    out, _ = run("-", stdin=unlabelled)
    assert "certificate.cert-manager.io/labelled configured" in out
    cert.refresh_from_db()
    assert cert.labels == {}


def test_apply_refuses_bad_labels_naming_them(db: None, tmp_path: Path) -> None:
    bad = LABELLED.replace("team: payments", '"bad key": payments\n    ok: "not ok!"')
    message = _expect_failure(bad, tmp_path)
    assert "document 2 (Certificate/labelled): metadata.labels[bad key]: 'bad key'" in message
    assert "metadata.labels[ok]: a label value must be empty" in message
    assert not Certificate.objects.exists()
    assert not Issuer.objects.exists()  # all or nothing
