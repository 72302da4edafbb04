"""Plain-text descriptions of resources for `certctl` (like `cmctl status` / `inspect`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from django.utils import timezone

from issuance.models import Certificate, CertificateRequest, Challenge, Event, Order, Secret
from issuance.pki.csr import CSRError, parse_csr
from issuance.pki.x509 import cert_info, split_pem_chain
from issuance.shapes import Condition
from issuance.timing.durations import format_relative


def _when(value: datetime | None) -> str:
    if value is None:
        return "-"
    relative = format_relative((value - timezone.now()).total_seconds())
    return f"{value.isoformat(timespec='seconds')} ({relative})"


def _conditions(conditions: Iterable[Condition], indent: str = "  ") -> list[str]:
    lines = []
    for cond in conditions:
        text = f"{indent}{cond.get('type')}={cond.get('status')}"
        if cond.get("reason"):
            text += f" reason={cond['reason']}"
        if cond.get("message"):
            text += f" message={cond['message']!r}"
        if cond.get("decidedBy"):
            text += f" by={cond['decidedBy']}"
        lines.append(text)
    return lines or [f"{indent}(none)"]


def _labels(cert: Certificate) -> str:
    """kubectl's form: key=value, sorted; "-" for none."""
    labels = cert.labels if isinstance(cert.labels, dict) else {}
    return ", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-"


def certificate_status(cert: Certificate, events: int = 10) -> str:
    lines = [
        f"Name:        {cert.name}",
        f"Issuer:      {cert.issuer.name} ({cert.issuer.kind})",
        f"DNS names:   {', '.join(cert.dns_names) or '-'}",
        f"Labels:      {_labels(cert)}",
        f"State:       {cert.state}",
        "Conditions:",
        *_conditions(cert.typed_conditions),
        f"Not before:  {_when(cert.not_before)}",
        f"Not after:   {_when(cert.not_after)}",
        f"Renewal:     {_when(cert.renewal_time)}",
        f"Revision:    {cert.revision if cert.revision is not None else '-'}",
    ]
    if cert.failed_issuance_attempts or cert.last_failure_time:
        lines += [
            f"Failed issuance attempts: {cert.failed_issuance_attempts or 1}",
            f"Last failure: {_when(cert.last_failure_time)}",
            f"Next retry:   {_when(cert.next_retry_time)}",
        ]
    if cert.renew_requested_at:
        lines.append(
            f"Renew requested: {_when(cert.renew_requested_at)} by {cert.renew_requested_by}"
        )
    requests = list(cert.requests.order_by("-revision")[:3])
    for cr in requests:
        lines += ["", request_status(cr, indent="  ")]
    recent = Event.objects.filter(certificate_name=cert.name).order_by("-created_at", "-id")[
        :events
    ]
    if recent:
        lines += ["", "Events (newest first):"]
        for ev in recent:
            who = f" by {ev.actor}" if ev.actor else ""
            lines.append(
                f"  {ev.created_at.isoformat(timespec='seconds')} {ev.type:<7} "
                f"{ev.kind}/{ev.name} {ev.reason}{who}: {ev.message}"
            )
    return "\n".join(lines)


def request_status(cr: CertificateRequest, indent: str = "") -> str:
    lines = [
        f"CertificateRequest {cr.name} (revision {cr.revision if cr.revision is not None else '-'})",
        f"  Requester: {cr.requester or '-'} ({cr.source})",
        f"  Approval:  {cr.approval}" + (f" by {cr.decided_by}" if cr.decided_by else ""),
        f"  State:     {cr.state}",
        "  Conditions:",
        *_conditions(cr.typed_conditions, "    "),
    ]
    order = Order.objects.filter(request=cr).first()
    if order is not None:
        lines.append(f"  Order {order.name}: state={order.state or '-'} {order.reason}".rstrip())
        for ch in Challenge.objects.filter(order=order).order_by("created_at", "id"):
            lines.append(
                f"    Challenge {ch.name}: {ch.type} {ch.dns_name} state={ch.state or 'queued'}"
                f" processing={ch.processing} presented={ch.presented} {ch.reason}".rstrip()
            )
    return "\n".join(indent + line for line in lines)


def inspect_certificate_pem(chain_pem: str) -> list[str]:
    lines: list[str] = []
    for i, block in enumerate(split_pem_chain(chain_pem)):
        info = cert_info(block)
        label = "Certificate" if i == 0 else f"Chain[{i}]"
        lines += [
            f"{label}:",
            f"  Subject:     {info.subject}",
            f"  Issuer:      {info.issuer}",
            f"  Serial:      {info.serial_number}",
            f"  Not before:  {info.not_before.isoformat()}",
            f"  Not after:   {info.not_after.isoformat()}",
            f"  DNS names:   {', '.join(info.dns_names) or '-'}",
            f"  IP addresses:{' ' + ', '.join(info.ip_addresses) if info.ip_addresses else ' -'}",
            f"  Public key:  {info.key_algorithm} {info.key_size or ''}".rstrip(),
            f"  CA:          {info.is_ca}",
        ]
    return lines


def inspect_certificate(cert: Certificate) -> str:
    secret = Secret.objects.filter(name=cert.secret_name).first()
    if secret is None or not secret.tls_crt:
        return f"Certificate {cert.name}: no issued certificate yet (secret {cert.secret_name})"
    lines = [f"Secret {secret.name} (type {secret.type}, updated {secret.updated_at.isoformat()})"]
    lines += inspect_certificate_pem(secret.tls_crt)
    # Never print the key itself: only that it is there and encrypted.
    lines.append(
        f"Private key: {'stored (encrypted at rest)' if secret.tls_key_ciphertext else 'none'}"
    )
    return "\n".join(lines)


def inspect_request(cr: CertificateRequest) -> str:
    lines = [request_status(cr), "CSR:"]
    try:
        csr = parse_csr(cr.csr_pem)
        lines += [
            f"  Subject:   {csr.subject or '-'}",
            f"  DNS names: {', '.join(csr.dns_names) or '-'}",
            f"  IPs:       {', '.join(csr.ip_addresses) or '-'}",
            f"  Key:       {csr.key_algorithm} {csr.key_size or ''}".rstrip(),
        ]
    except CSRError as exc:
        lines.append(f"  (unreadable: {exc})")
    if cr.certificate_pem:
        lines += inspect_certificate_pem(cr.certificate_pem)
    return "\n".join(lines)
