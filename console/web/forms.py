"""Forms of the console: list filters, approve/deny decisions, a new certificate, revoke."""

from __future__ import annotations

from typing import Any

from django import forms

from issuance.models import REASONS, CertificateState, Issuer

KEY_ALGORITHMS = (("ECDSA", "ECDSA P-256"), ("RSA", "RSA 2048"), ("Ed25519", "Ed25519"))
KEY_SIZES = {"ECDSA": 256, "RSA": 2048}


class CertificateFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=253, label="Search")
    state = forms.ChoiceField(
        required=False, choices=[("", "any state"), *CertificateState.choices]
    )
    issuer = forms.CharField(required=False, max_length=253)
    backoff = forms.BooleanField(required=False, label="in failure backoff")


class DecisionForm(forms.Form):
    """Approve or deny: a short machine-readable reason and a message for people."""

    reason = forms.CharField(max_length=128, required=False)
    message = forms.CharField(max_length=1024, required=False, widget=forms.Textarea)

    def clean_reason(self) -> str:
        reason = str(self.cleaned_data.get("reason") or "").strip()
        if reason and not all(ch.isalnum() or ch in "-_." for ch in reason):
            raise forms.ValidationError(
                "use a CamelCase word (letters, digits, '-', '_', '.'), e.g. NotOurDomain"
            )
        return reason


class NewCertificateForm(forms.Form):
    """The common fields; the full spec is validated by issuance.specs (same rules as the API)."""

    name = forms.CharField(max_length=253, help_text="lowercase letters, digits, '-' and '.'")
    issuer = forms.ChoiceField(choices=())
    dns_names = forms.CharField(
        label="DNS names",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="one per line (or comma separated)",
        required=False,
    )
    common_name = forms.CharField(max_length=64, required=False)
    duration = forms.CharField(required=False, help_text="Go duration, e.g. 2160h (the default)")
    key_algorithm = forms.ChoiceField(choices=KEY_ALGORITHMS, initial="ECDSA")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = Issuer.objects.order_by("name").values_list("name", flat=True)
        self.fields["issuer"].choices = [(n, n) for n in names]  # type: ignore[attr-defined]

    def spec(self) -> dict[str, Any]:
        data = self.cleaned_data
        dns = [p.strip() for chunk in data["dns_names"].splitlines() for p in chunk.split(",")]
        spec: dict[str, Any] = {
            "secretName": f"{data['name']}-tls",
            "issuerRef": {"name": data["issuer"], "kind": "Issuer"},
            "dnsNames": [n for n in dns if n],
            "privateKey": {"algorithm": data["key_algorithm"]},
        }
        size = KEY_SIZES.get(data["key_algorithm"])
        if size:
            spec["privateKey"]["size"] = size
        if data["common_name"]:
            spec["commonName"] = data["common_name"]
        if data["duration"]:
            spec["duration"] = data["duration"]
        return spec


REVOKE_REASON_HELP = {
    "unspecified": "no particular reason",
    "keyCompromise": "the private key leaked or may have (the request is signed with it)",
    "superseded": "replaced by another certificate",
    "cessationOfOperation": "the names are no longer served",
    "affiliationChanged": "the subject's name or organisation changed",
    "privilegeWithdrawn": "the right to the names was withdrawn",
}


class RevokeForm(forms.Form):
    """Revoke: an RFC 5280 reason (the same names the API and certctl take)."""

    reason = forms.ChoiceField(
        choices=[(r, f"{r}: {REVOKE_REASON_HELP.get(r, '')}") for r in REASONS],
        initial="unspecified",
    )
