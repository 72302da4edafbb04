"""What saving a changed Certificate spec would do, said before it is saved (the console's
edit preview): which fields change and whether a new certificate will be issued, and why.

The decision is the certificates controller's own (certificate_policy.forecast runs the
trigger's checks on the changed spec); the spec is validated by the same validator as
apply_certificate_ex, so the preview and the save answer alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.utils import timezone

from issuance.controllers.certificate_policy import Forecast, forecast
from issuance.models import Certificate, Issuer
from issuance.shapes import CertificateSpec
from issuance.specs.certificate import validate_certificate_spec
from issuance.specs.errors import SpecError
from issuance.specs.outcome import changed_fields


@dataclass(frozen=True)
class ChangePreview:
    spec: CertificateSpec  # the normalized spec that would be stored
    changed: list[str]  # top-level fields, without the "spec." prefix
    forecast: Forecast | None  # None when nothing changes

    @property
    def reissues(self) -> bool:
        return self.forecast is not None and self.forecast.reissues

    @property
    def summary(self) -> str:
        fc = self.forecast
        if fc is None:
            return "Nothing changed: saving does nothing."
        fields = ", ".join(self.changed)
        if fc.already is not None:
            return (
                f"{fields} changed. No valid certificate matches the current spec yet "
                f"({fc.already.message}): the issuance that follows uses the new spec."
            )
        if fc.violation is not None:
            return f"{fields} changed: a new certificate will be issued ({fc.violation.message})."
        moved = ""
        if fc.renewal_after != fc.renewal_before and fc.renewal_after is not None:
            moved = f"; the next renewal moves to {fc.renewal_after:%Y-%m-%d %H:%M} UTC"
        only = "only " if len(self.changed) == 1 else ""
        return f"{only}{fields} changed: no re-issue, the stored certificate still serves{moved}."


def preview_certificate_change(cert: Certificate, spec: Any) -> ChangePreview:
    """Raises SpecError (the API's field errors) when the spec is invalid."""
    normalized = validate_certificate_spec(cert.name, spec)
    changed = [f.removeprefix("spec.") for f in changed_fields(cert.spec, normalized)]
    if not changed:
        return ChangePreview(normalized, [], None)
    issuer = Issuer.objects.filter(name=normalized["issuerRef"]["name"]).first()
    if issuer is None:  # deleted since validation
        raise SpecError([("spec.issuerRef.name", "unknown issuer")])
    return ChangePreview(normalized, changed, forecast(cert, normalized, issuer, timezone.now()))
