"""Which Certificate a resource belongs to, for timeline entries and live-update topics, and
its labels, for the ACME solvers' selector.matchLabels."""

from __future__ import annotations

from issuance.models.certificate import Certificate
from issuance.models.certificaterequest import CertificateRequest
from issuance.models.challenge import Challenge
from issuance.models.order import Order


def certificate_name_of(obj: Certificate | CertificateRequest | Order | Challenge) -> str:
    """The owning Certificate's name, or "" for what an external CSR started.

    Follows Challenge → Order → CertificateRequest → Certificate; the worker loads those
    rows with the one it reconciles (issuance.controllers.registry `related`), so this
    costs no query there.
    """
    if isinstance(obj, Certificate):
        return obj.name
    if isinstance(obj, Challenge):
        obj = obj.order
    request = obj.request if isinstance(obj, Order) else obj
    certificate = request.certificate
    return certificate.name if certificate is not None else ""


def certificate_labels_of(obj: CertificateRequest | Order) -> dict[str, str]:
    """The owning Certificate's labels ({} for what an external CSR started), followed as
    certificate_name_of follows it (no query where the worker loaded the rows)."""
    request = obj.request if isinstance(obj, Order) else obj
    certificate = request.certificate
    if certificate is None or not isinstance(certificate.labels, dict):
        return {}
    return {str(k): str(v) for k, v in certificate.labels.items()}
