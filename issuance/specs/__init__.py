"""Validation, normalization and create/update services for resource specs.

Shared by the REST API, `manage.py apply` and the web console, so every entry point
accepts and rejects exactly the same specs, with the same field paths in its errors.
"""

from issuance.specs.certificate import (
    apply_certificate,
    apply_certificate_ex,
    validate_certificate_spec,
)
from issuance.specs.certificaterequest import create_certificate_request, validate_request_spec
from issuance.specs.errors import SpecError
from issuance.specs.issuer import apply_issuer, apply_issuer_ex, validate_issuer_spec
from issuance.specs.outcome import Applied, Outcome

__all__ = [
    "Applied",
    "Outcome",
    "SpecError",
    "apply_certificate",
    "apply_certificate_ex",
    "apply_issuer",
    "apply_issuer_ex",
    "create_certificate_request",
    "validate_certificate_spec",
    "validate_issuer_spec",
    "validate_request_spec",
]
