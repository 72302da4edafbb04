"""Secret export: a Certificate with `spec.secretExport: {namespace, name}` gets every new
revision written to a `kubernetes.io/tls` Secret (tls.crt, tls.key, ca.crt) in that
namespace, created or replaced (read-modify-write, retried on 409), with the labels and
annotations of `spec.secretTemplate`. A changed template is written again without a new
revision (apply_certificate_ex clears the export's revision).

No hook in the issuing controller is needed: the connector compares each exporting
Certificate's revision with the revision last exported (SecretExport) on every pass.
"""

from __future__ import annotations

import base64
import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from issuance.delivery.formats import KeyPair, secret_extras
from issuance.kubernetes.csr_connector.csr_api import KubeApi
from issuance.kubernetes.json_client import ApiException, Obj
from issuance.models import Certificate, Event, Secret, SecretExport
from issuance.observability import events
from issuance.timing.backoff import error_backoff

log = logging.getLogger("issuance.kubernetes.csr_connector")
MAX_CONFLICT_RETRIES = 5
MANAGED_BY = "issuance-console"


def _target(cert: Certificate) -> tuple[str, str] | None:
    export = cert.typed_spec.get("secretExport")
    if not isinstance(export, dict) or not export.get("namespace") or not export.get("name"):
        return None
    return str(export["namespace"]), str(export["name"])


def due_exports(limit: int = 50) -> list[tuple[Certificate, SecretExport]]:
    """Exporting certificates whose current revision is not in their Secret yet."""
    now = timezone.now()
    out: list[tuple[Certificate, SecretExport]] = []
    certs = Certificate.objects.filter(spec__has_key="secretExport", revision__isnull=False)
    for cert in certs.select_related("secret_export").order_by("pk"):
        target = _target(cert)
        if target is None:
            continue
        export = getattr(cert, "secret_export", None)
        if export is None:
            export = SecretExport.objects.create(
                certificate=cert, namespace=target[0], name=target[1]
            )
        moved = (export.namespace, export.name) != target
        if moved:
            export.namespace, export.name = target
            export.exported_revision = None
            export.next_attempt_at = None
            export.attempts = 0
            export.save(
                update_fields=[
                    "namespace",
                    "name",
                    "exported_revision",
                    "next_attempt_at",
                    "attempts",
                ]
            )
        if export.exported_revision == cert.revision:
            continue
        if export.next_attempt_at and export.next_attempt_at > now:
            continue
        out.append((cert, export))
        if len(out) >= limit:
            break
    return out


def secret_body(cert: Certificate, stored: Secret, namespace: str, name: str) -> Obj:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    # additionalOutputFormats and keystores: the keys cert-manager writes for them.
    extras = secret_extras(KeyPair(stored.tls_crt, stored.tls_key, stored.ca_crt), cert.typed_spec)

    # spec.secretTemplate first: what the console writes itself cannot be overridden (the
    # validator refuses those keys; this also holds for a spec stored before it did).
    template = cert.typed_spec.get("secretTemplate") or {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                **template.get("labels", {}),
                "app.kubernetes.io/managed-by": MANAGED_BY,
            },
            "annotations": {
                **template.get("annotations", {}),
                "cert-manager.io/certificate-name": cert.name,
                "cert-manager.io/issuer-name": cert.issuer.name,
                "issuance.console/revision": str(cert.revision or ""),
            },
        },
        "data": {
            "tls.crt": b64(stored.tls_crt),
            "tls.key": b64(stored.tls_key),
            "ca.crt": b64(stored.ca_crt),
            **{key: base64.b64encode(value).decode() for key, value in extras.items()},
        },
    }


def write_secret(api: KubeApi, body: Obj) -> tuple[Obj, int]:
    """Create, or replace on the current resourceVersion; returns (secret, conflicts)."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    conflicts = 0
    while True:
        try:
            current = api.read_secret(namespace, name)
        except ApiException as exc:
            if exc.status != 404:
                raise
            try:
                return api.create_secret(namespace, body), conflicts
            except ApiException as create_exc:
                if create_exc.status != 409 or conflicts >= MAX_CONFLICT_RETRIES:
                    raise
                conflicts += 1  # created by someone else meanwhile: replace it
                continue
        new = dict(body)
        new["metadata"] = {
            **body["metadata"],
            "resourceVersion": current["metadata"]["resourceVersion"],
        }
        if current.get("type") and current["type"] != body["type"]:
            raise ValueError(
                f"Secret {namespace}/{name} exists with type {current['type']}; "
                "the type of a Secret cannot change (delete it or export elsewhere)"
            )
        try:
            return api.replace_secret(namespace, name, new), conflicts
        except ApiException as exc:
            if exc.status != 409 or conflicts >= MAX_CONFLICT_RETRIES:
                raise
            conflicts += 1


def _claim(record: SecretExport) -> bool:
    """Compare-and-set lease, so two workers do not write the same Secret at once."""
    now = timezone.now()
    current = SecretExport.objects.filter(pk=record.pk)
    if record.next_attempt_at is None:
        current = current.filter(next_attempt_at__isnull=True)
    else:
        current = current.filter(next_attempt_at=record.next_attempt_at)
    # As long as a worker's claim (a dead worker's export is retried that soon); writes carry
    # the Secret's resourceVersion, so an export that outlives it cannot clobber a newer one.
    lease = now + settings.WORKER_LEASE
    if not current.update(next_attempt_at=lease):
        return False
    record.next_attempt_at = lease
    return True


def export(api: KubeApi, cert: Certificate, record: SecretExport) -> bool:
    """One export attempt; True when the Secret now holds the certificate's revision."""
    stored = Secret.objects.filter(name=cert.secret_name).first()
    if stored is None or not stored.tls_crt:
        return False  # the issuing controller has not stored the key pair yet
    if not _claim(record):
        return False
    now = timezone.now()
    try:
        # Inside: a keystore whose password Secret is missing fails the export (LookupError).
        body = secret_body(cert, stored, record.namespace, record.name)
        _, conflicts = write_secret(api, body)
    except (ApiException, ValueError, LookupError, OSError) as exc:
        record.attempts += 1
        delay: timedelta = error_backoff(record.attempts)
        record.next_attempt_at = now + delay
        detail = (f"{exc.status} {exc.reason}" if isinstance(exc, ApiException) else str(exc))[
            :2000
        ]
        first = record.last_error != detail
        record.last_error = detail
        record.save(update_fields=["attempts", "next_attempt_at", "last_error"])
        if first:
            events.record(
                "Certificate",
                cert.name,
                "SecretExportFailed",
                f"Writing Secret {record.namespace}/{record.name} failed: {detail}",
                type_=Event.WARNING,
                certificate_name=cert.name,
            )
        return False
    record.exported_revision = cert.revision
    record.exported_at = now
    record.attempts = 0
    record.next_attempt_at = None
    record.last_error = ""
    record.save()
    events.record(
        "Certificate",
        cert.name,
        "SecretExported",
        f"Revision {cert.revision} written to Secret {record.namespace}/{record.name}"
        + (f" after {conflicts} conflict(s)" if conflicts else ""),
        certificate_name=cert.name,
    )
    return True
