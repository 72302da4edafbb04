"""Forms of the console: list filters, approve/deny decisions, a certificate (new, edit,
clone), revoke, delete, bulk actions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django import forms

from issuance.models import REASONS, CertificateState, EndpointProtocol, Issuer
from issuance.timing.durations import (
    FRIENDLY_EXAMPLES,
    DurationError,
    describe_go_duration,
    go_duration,
    parse_friendly_duration,
)

KEY_ALGORITHMS = (("ECDSA", "ECDSA P-256"), ("RSA", "RSA 2048"), ("Ed25519", "Ed25519"))
KEY_SIZES = {"ECDSA": 256, "RSA": 2048}


class CertificateFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=253, label="Search")
    state = forms.ChoiceField(
        required=False, choices=[("", "any state"), *CertificateState.choices]
    )
    issuer = forms.CharField(required=False, max_length=253)
    backoff = forms.BooleanField(required=False, label="in failure backoff")
    # What the endpoints serve (issuance/probing/deployment.py); the console's own
    # certificates only (mirrored ones have no endpoints here).
    deployed = forms.ChoiceField(
        required=False,
        label="Deployed",
        choices=[
            ("", "any deployment"),
            ("stale", "Deployed: stale"),
            ("mismatch", "Mismatch"),
            ("unreachable", "Unreachable"),
            ("deploying", "Deploying"),
            ("unchecked", "Unchecked"),
            ("deployed", "Deployed"),
            ("none", "no endpoints"),
        ],
    )


class DecisionForm(forms.Form):
    """Approve or deny: a short machine-readable reason and a message for people."""

    reason = forms.CharField(
        max_length=128,
        required=False,
        help_text="optional: one CamelCase word that scripts can match, e.g. NotOurDomain",
    )
    message = forms.CharField(
        max_length=1024,
        required=False,
        widget=forms.Textarea,
        help_text="optional: a sentence for people, shown on the request and in the audit log",
    )

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
    duration = forms.CharField(
        label="Lifetime",
        required=False,
        help_text="how long each issued certificate is valid, e.g. 90 days (the default), "
        "30d or 12h30m",
    )
    key_algorithm = forms.ChoiceField(choices=KEY_ALGORITHMS, initial="ECDSA")
    renew_before = forms.CharField(
        label="Renew before expiry",
        required=False,
        help_text="how long before it expires to renew, e.g. 30 days "
        "(default: a third of the lifetime)",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = Issuer.objects.order_by("name").values_list("name", flat=True)
        self.fields["issuer"].choices = [(n, n) for n in names]  # type: ignore[attr-defined]

    def clean_duration(self) -> str:
        return friendly_to_go(self.cleaned_data.get("duration"))

    def clean_renew_before(self) -> str:
        return friendly_to_go(self.cleaned_data.get("renew_before"))

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
        if data["renew_before"]:
            spec["renewBefore"] = data["renew_before"]
        return spec

    def spec_over(self, base: Mapping[str, Any]) -> dict[str, Any]:
        """The form's fields over an existing spec (edit, clone): what the form does not
        show (usages, subject, renewal windows, ...) is kept as it was."""
        form = self.spec()
        spec = {k: v for k, v in base.items() if k not in FORM_SPEC_FIELDS}
        spec.update({k: v for k, v in form.items() if k not in ("secretName", "privateKey")})
        old_key = dict(base.get("privateKey") or {})
        if form["privateKey"]["algorithm"] == old_key.get("algorithm", "RSA"):
            if old_key:
                spec["privateKey"] = old_key  # unchanged: keep its size, encoding, rotation
        else:
            keep = {k: v for k, v in old_key.items() if k in ("rotationPolicy", "encoding")}
            spec["privateKey"] = {**keep, **form["privateKey"]}
        old_ref = base.get("issuerRef") or {}
        if old_ref.get("name") == form["issuerRef"]["name"]:
            spec["issuerRef"] = old_ref  # same issuer: keep its kind and group as written
        spec["secretName"] = base.get("secretName") or form["secretName"]
        return spec

    @staticmethod
    def initial_from(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The form's values for an existing spec (edit, clone)."""
        return {
            "name": name,
            "issuer": (spec.get("issuerRef") or {}).get("name", ""),
            "dns_names": "\n".join(spec.get("dnsNames") or []),
            "common_name": spec.get("commonName", ""),
            "duration": describe_go_duration(spec["duration"]) if spec.get("duration") else "",
            "key_algorithm": (spec.get("privateKey") or {}).get("algorithm", "RSA"),
            "renew_before": (
                describe_go_duration(spec["renewBefore"]) if spec.get("renewBefore") else ""
            ),
        }

    def add_spec_errors(self, errors: list[tuple[str, str]]) -> None:
        """The API's field errors (SpecError paths) next to the form field they are about."""
        for path, message in errors:
            field = next(
                (
                    f
                    for prefix, f in SPEC_ERROR_FIELDS
                    if path == prefix or path.startswith((prefix + ".", prefix + "["))
                ),
                None,
            )
            item = _DNS_ITEM.fullmatch(path)  # which line of the DNS names box
            words = _in_form_words(message)
            if item:
                words = f"DNS name {int(item.group(1)) + 1}: {words}"
            if field is not None and field in self.fields:
                self.add_error(field, words)
            else:
                self.add_error(None, words)


# The spec fields the certificate form sets; everything else in a spec is left alone.
FORM_SPEC_FIELDS = ("dnsNames", "commonName", "duration", "renewBefore", "issuerRef")
SPEC_ERROR_FIELDS = (
    ("spec.dnsNames", "dns_names"),
    ("spec.commonName", "common_name"),
    ("spec.duration", "duration"),
    ("spec.renewBefore", "renew_before"),
    ("spec.issuerRef", "issuer"),
    ("spec.privateKey", "key_algorithm"),
    ("spec.secretName", "name"),
    ("name", "name"),
    ("spec", "dns_names"),  # "at least one of commonName, dnsNames, ..."
)
# What the spec validator's messages call the fields, in the form's own words: a message
# such as "at least one of commonName, dnsNames, ..." names fields the form does not have.
_SPEC_MESSAGES = (
    (
        "put it in ipAddresses instead of dnsNames",
        "this form takes DNS names only (IP addresses go in the API's spec.ipAddresses)",
    ),
    (
        "at least one of commonName, dnsNames, ipAddresses, uris, emailAddresses or otherNames",
        "enter at least one DNS name (or a common name)",
    ),
)
_SPEC_WORDS = (
    ("renewBeforePercentage", "renew before (percentage)"),
    ("renewBefore", "renew before expiry"),
    ("duration", "lifetime"),
    ("commonName", "common name"),
    ("dnsNames", "DNS names"),
    ("issuerRef", "issuer"),
    ("secretName", "name"),
    ("privateKey", "key algorithm"),
)


def _in_form_words(message: str) -> str:
    message = _DNS_ITEM_IN_TEXT.sub(lambda m: f"DNS name {int(m.group(1)) + 1}", message)
    for spec_text, form_text in _SPEC_MESSAGES:
        message = message.replace(spec_text, form_text)
    for spec_word, form_word in _SPEC_WORDS:
        message = re.sub(rf"\b{spec_word}\b", form_word, message)
    # the normalized Go durations in a message ("720h0m0s >= 2160h0m0s") as people read them
    return _GO_DURATION.sub(lambda m: describe_go_duration(m.group(0)), message)


_DNS_ITEM = re.compile(r"spec\.dnsNames\[(\d+)\]")
_DNS_ITEM_IN_TEXT = re.compile(r"(?:spec\.)?dnsNames\[(\d+)\]")
_GO_DURATION = re.compile(r"\b\d+h\d+m\d+s\b")


def friendly_to_go(value: object) -> str:
    """A duration typed in a form ("90 days", "90d", "2160h", "12h30m") as the Go duration the
    spec keeps ("2160h"); "" stays "" (the default). A clear error when it does not parse."""
    text = str(value or "").strip()
    if not text:
        return ""
    try:
        delta = parse_friendly_duration(text)
    except DurationError as exc:
        raise forms.ValidationError(str(exc)) from None
    if delta.total_seconds() < 1:
        raise forms.ValidationError(f"must be at least 1 second; write it like {FRIENDLY_EXAMPLES}")
    return go_duration(delta)


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


class DeleteCertificateForm(forms.Form):
    """Delete: keep the stored key pair (the default) or delete it too."""

    key_pair = forms.ChoiceField(
        choices=[("keep", "Keep the Secret"), ("remove", "Delete the Secret too")],
        initial="keep",
        widget=forms.RadioSelect,
        label="The stored key pair",
    )


class BulkForm(forms.Form):
    """A bulk action on the selected certificates (names come from the list's checkboxes)."""

    kind = forms.ChoiceField(choices=[("renew", "Renew"), ("delete", "Delete")])
    key_pair = forms.ChoiceField(
        choices=[("keep", "Keep the Secrets"), ("remove", "Delete the Secrets too")],
        initial="keep",
        required=False,
        widget=forms.RadioSelect,
        label="The stored key pairs",
    )


class EndpointForm(forms.Form):
    address = forms.CharField(
        label="Endpoint",
        max_length=262,
        help_text="host or host:port, e.g. web-1.example.com:443 (the port defaults by protocol)",
    )
    server_name = forms.CharField(
        label="SNI name",
        max_length=253,
        required=False,
        help_text="the name sent and checked; empty: the host",
    )
    protocol = forms.ChoiceField(choices=EndpointProtocol.choices, initial="tls")
