"""Issuer controller: is the issuer able to sign? (Ready condition, observed generation)."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from issuance.controllers.base import Result
from issuance.issuers import ca
from issuance.issuers.local import max_duration_of
from issuance.models import Event, Issuer, IssuerKind
from issuance.observability import events
from issuance.timing.durations import DurationError, parse_duration

# A CA Secret may be fixed at any time; look again this often while it is broken.
CA_NOT_READY_RECHECK = timedelta(minutes=1)
# Re-validate a ready CA now and then (it may expire or its Secret may be replaced).
CA_RECHECK = timedelta(hours=1)


def reconcile(issuer: Issuer) -> Result:
    if issuer.kind == IssuerKind.ACME:
        from issuance.acme import issuer as acme_issuer

        return acme_issuer.reconcile_issuer(issuer)
    bad_duration = _check_max_duration(issuer)
    if bad_duration:
        _set_ready(issuer, "False", "InvalidMaxDuration", bad_duration)
        return Result.done()
    if issuer.kind == IssuerKind.SELF_SIGNED:
        _set_ready(issuer, "True", "IsReady", "")
        return Result.done()
    if issuer.kind == IssuerKind.CA:
        return _reconcile_ca(issuer)
    _set_ready(issuer, "False", "UnknownKind", f"unknown issuer kind {issuer.kind!r}")
    return Result.done()


def _reconcile_ca(issuer: Issuer) -> Result:
    if issuer.ca_spec.get("generate"):
        created = ca.generate_keypair(issuer)
        if created is not None:
            events.record(
                "Issuer",
                issuer.name,
                "KeyPairGenerated",
                f"Generated a self-signed CA key pair into secret {created.name}",
            )
            return Result.now()
    try:
        pair = ca.load_keypair(issuer)
    except ca.CAKeyPairError as exc:
        _set_ready(issuer, "False", "ErrGetKeyPair", str(exc))
        return Result.after(CA_NOT_READY_RECHECK)
    _set_ready(issuer, "True", "KeyPairVerified", f"Signing CA verified ({pair.subject})")
    return Result.after(CA_RECHECK)


def _check_max_duration(issuer: Issuer) -> str:
    value = max_duration_of(issuer)
    if not value:
        return ""
    try:
        if parse_duration(str(value)) <= timedelta(0):
            return f"spec.{issuer.kind}.maxDuration must be positive"
    except DurationError as exc:
        return f"spec.{issuer.kind}.maxDuration: {exc}"
    return ""


def _set_ready(issuer: Issuer, status: str, reason: str, message: str) -> None:
    was = issuer.get_condition("Ready")
    changed = issuer.set_condition("Ready", status, reason, message, now=timezone.now())
    if not changed and issuer.observed_generation == issuer.generation:
        return
    issuer.observed_generation = issuer.generation
    issuer.status_message = message if status != "True" else ""
    issuer.save(update_fields=["conditions", "observed_generation", "status_message", "updated_at"])
    if was is None or was.get("status") != status:
        events.record(
            "Issuer",
            issuer.name,
            reason,
            message or ("Issuer is ready" if status == "True" else "Issuer is not ready"),
            type_=Event.NORMAL if status == "True" else Event.WARNING,
        )
