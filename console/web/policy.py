"""Approval policy editor: an issuer's `spec.approvalPolicy` edited as autoApprove plus two
YAML boxes (rules, deny), saved through the issuer spec layer (`apply_issuer_ex`, as the
API), and a preview that runs the real decision function (`issuance.approval.evaluate`) on
a pasted CSR with the edited, unsaved policy.

Why YAML boxes and not a field per check: deny rules are a list of objects with nine
optional conditions each; a textarea keeps the full shape (and docs/approvals.md's example pastes
in as is), and the spec layer's errors, which name the field path, are shown next to the
box they are about. Nothing is validated here twice.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml
from django import forms
from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_http_methods, require_POST

from console.web.access import permission_required, render_page
from issuance.access import permissions
from issuance.approval import Decision, evaluate
from issuance.models import CertificateRequest, Issuer
from issuance.pki.csr import CSRError, CSRInfo, parse_csr
from issuance.specs.errors import SpecError
from issuance.specs.issuer import apply_issuer_ex, validate_issuer_spec
from issuance.specs.outcome import Applied, Outcome

POLICY_PATH = "spec.approvalPolicy"
# Which box a spec-layer error path belongs to; anything else is shown above the form.
FIELD_OF_PATH = (
    (f"{POLICY_PATH}.autoApprove", "auto_approve"),
    (f"{POLICY_PATH}.rules", "rules"),
    (f"{POLICY_PATH}.deny", "deny"),
)
RULES_EXAMPLE = """allowedSignerNames: [example.com/kubelet-serving]
requesterPattern: 'system:node:[a-z0-9-]+'
commonNameMustMatchRequester: true
dnsSanRegex: '[a-z0-9-]+\\.nodes\\.example\\.com'
maxDnsSans: 3
ipSanCidrs: [10.0.0.0/8]
maxExpirationSeconds: 2592000"""
DENY_EXAMPLE = """- name: no-wildcards
  message: wildcard certificates are never issued to nodes
  dnsSanRegex: '\\*\\..*'"""


class PolicyForm(forms.Form):
    auto_approve = forms.ChoiceField(
        required=False,
        label="autoApprove",
        choices=[
            ("", "not set (owned)"),
            ("owned", "owned: only a Certificate's own requests"),
            ("all", "all: every request the rules and deny rules let through"),
            ("none", "none: every request waits for a person"),
        ],
    )
    rules = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 9}))
    deny = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 9}))
    # The issuer's generation when the editor was opened (optional for API-like clients).
    generation = forms.IntegerField(required=False, widget=forms.HiddenInput)


class PreviewForm(forms.Form):
    """What the policy looks at besides the CSR (as a bootstrap client or Kubernetes CSR
    would carry it)."""

    csr = forms.CharField(label="CSR (PEM)", widget=forms.Textarea(attrs={"rows": 8}))
    requester = forms.CharField(required=False, max_length=253)
    groups = forms.CharField(required=False, max_length=2000, help_text="comma separated")
    signer_name = forms.CharField(required=False, max_length=253, label="signerName")
    usages = forms.CharField(required=False, max_length=2000, help_text="comma separated")
    expiration_seconds = forms.IntegerField(required=False, min_value=1, label="expirationSeconds")

    def clean_csr(self) -> str:
        pem = str(self.cleaned_data["csr"]).strip()
        try:
            parse_csr(pem)
        except CSRError as exc:
            raise forms.ValidationError(f"not a readable CSR: {exc}") from None
        return pem + "\n"


@dataclass
class Edited:
    """The policy as the form gave it, or the problems found on the way."""

    policy: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, message: str) -> None:
        self.errors.setdefault(name, []).append(message)


def _yaml_box(edited: Edited, name: str, text: str) -> None:
    if not text.strip():
        return
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        edited.add(name, f"not valid YAML: {exc}")
        return
    if value is not None:
        edited.policy["deny" if name == "deny" else "rules"] = value


def edited_policy(form: PolicyForm) -> Edited:
    edited = Edited()
    if not form.is_valid():
        for name, errs in form.errors.items():
            for err in errs:
                edited.add(name, str(err))
        return edited
    data = form.cleaned_data
    if data["auto_approve"]:
        edited.policy["autoApprove"] = data["auto_approve"]
    _yaml_box(edited, "rules", data["rules"])
    _yaml_box(edited, "deny", data["deny"])
    return edited


def spec_with(issuer: Issuer, policy: dict[str, Any]) -> dict[str, Any]:
    """The issuer's stored spec with its approvalPolicy replaced (removed when empty)."""
    spec: dict[str, Any] = copy.deepcopy(issuer.spec) if isinstance(issuer.spec, dict) else {}
    if policy:
        spec["approvalPolicy"] = policy
    else:
        spec.pop("approvalPolicy", None)
    return spec


def route_spec_errors(edited: Edited, exc: SpecError) -> None:
    for path, message in exc.errors:
        name = next((f for prefix, f in FIELD_OF_PATH if path.startswith(prefix)), "general")
        edited.add(name, f"{path}: {message}")


def initial_of(issuer: Issuer) -> dict[str, str]:
    policy = issuer.typed_spec.get("approvalPolicy") or {}

    def dump(value: object) -> str:
        return yaml.safe_dump(value, sort_keys=False, allow_unicode=True) if value else ""

    return {
        "auto_approve": str(policy.get("autoApprove") or ""),
        "rules": dump(policy.get("rules")),
        "deny": dump(policy.get("deny")),
        "generation": str(issuer.generation),
    }


def preview_decision(issuer: Issuer, spec: dict[str, Any], data: dict[str, Any]) -> Decision:
    """The real decision function on an unsaved request of an unsaved copy of the issuer:
    nothing is written (evaluate is pure; DNS is asked only for requireDnsResolvesToIps).
    Raises SpecError when the edited policy is invalid."""
    plan = validate_issuer_spec(issuer.name, spec, lookups=False)
    draft = Issuer(name=issuer.name, kind=plan.kind, spec=plan.spec)

    def words(text: str) -> list[str]:
        return [w.strip() for w in text.split(",") if w.strip()]

    request_spec: dict[str, Any] = {"request": data["csr"]}
    if data["requester"]:
        request_spec["username"] = data["requester"]
    if data["groups"]:
        request_spec["groups"] = words(data["groups"])
    if data["signer_name"]:
        request_spec["signerName"] = data["signer_name"]
    if data["usages"]:
        request_spec["usages"] = words(data["usages"])
    if data["expiration_seconds"] is not None:
        request_spec["expirationSeconds"] = data["expiration_seconds"]
    request = CertificateRequest(
        name="preview", issuer=draft, requester=data["requester"], spec=request_spec
    )
    return evaluate(request)


def may_preview(request: HttpRequest) -> bool:
    return permissions.may(request.user, "approval-policy", "preview")


def _render(
    request: HttpRequest,
    issuer: Issuer,
    form: PolicyForm,
    preview: PreviewForm,
    *,
    errors: dict[str, list[str]] | None = None,
    decision: Decision | None = None,
    csr: CSRInfo | None = None,
    status: int = 200,
) -> HttpResponse:
    response = render_page(
        request,
        "console/policy.html",
        {
            "issuer": issuer,
            "form": form,
            "preview": preview,
            "errors": errors or {},
            "decision": decision,
            "csr": csr,
            "can_save": permissions.may(request.user, "approval-policy", "change"),
            "can_preview": may_preview(request),
            "rules_example": RULES_EXAMPLE,
            "deny_example": DENY_EXAMPLE,
        },
    )
    response.status_code = status
    return response


@require_http_methods(["GET", "POST"])
@permission_required("approval-policy", "read", post="change")
def policy_editor(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the editor (viewers read it); POST: save (admin)."""
    issuer = get_object_or_404(Issuer.objects.defer("acme_account_key_ciphertext"), name=name)
    if request.method == "POST":
        return save_policy(request, issuer)
    form = PolicyForm(initial=initial_of(issuer))
    return _render(request, issuer, form, PreviewForm())


class StaleEdit(Exception):
    pass


def _apply(issuer: Issuer, form: PolicyForm, edited: Edited, actor: str) -> Applied[Issuer]:
    """Under the issuer's row lock: the rest of the spec is the stored one at this moment,
    and an edit made on an older generation than the stored one is refused (two people
    editing at once would otherwise silently undo each other)."""
    with transaction.atomic():
        current = Issuer.objects.select_for_update().get(pk=issuer.pk)
        seen = form.cleaned_data.get("generation")
        if seen is not None and seen != current.generation:
            raise StaleEdit(
                f"The issuer changed since this page was opened (generation {seen}, now "
                f"{current.generation}); nothing was saved. Open the editor again to see "
                "the current policy, then redo your change."
            )
        return apply_issuer_ex(
            current.name,
            spec_with(current, edited.policy),
            cluster=current.cluster_scoped,
            actor=actor,
        )


def save_policy(request: HttpRequest, issuer: Issuer) -> HttpResponse:
    form = PolicyForm(request.POST)
    edited = edited_policy(form)
    if not edited.errors:
        try:
            applied = _apply(issuer, form, edited, request.user.get_username())
        except StaleEdit as exc:
            edited.add("general", str(exc))
        except SpecError as exc:
            route_spec_errors(edited, exc)
        else:
            if applied.outcome is Outcome.UNCHANGED:
                messages.info(request, f"Approval policy of {issuer.name} unchanged.")
            else:
                messages.success(
                    request,
                    f"Approval policy of {issuer.name} saved "
                    f"(generation {applied.obj.generation}).",
                )
            return redirect("web:issuer-policy", name=issuer.name)
    # The test box keeps what was typed in it, without "required" errors for a save.
    kept = PreviewForm(
        initial={name: request.POST.get(name, "") for name in PreviewForm.base_fields}
    )
    return _render(request, issuer, form, kept, errors=edited.errors, status=400)


@require_POST
@permission_required("approval-policy", "preview")
def preview_policy(request: HttpRequest, name: str) -> HttpResponse:
    issuer = get_object_or_404(Issuer.objects.defer("acme_account_key_ciphertext"), name=name)
    form = PolicyForm(request.POST)
    preview = PreviewForm(request.POST)
    edited = edited_policy(form)
    decision = None
    csr = None
    if preview.is_valid() and not edited.errors:
        try:
            decision = preview_decision(
                issuer, spec_with(issuer, edited.policy), preview.cleaned_data
            )
        except SpecError as exc:
            route_spec_errors(edited, exc)
        csr = parse_csr(preview.cleaned_data["csr"])
    return _render(request, issuer, form, preview, errors=edited.errors, decision=decision, csr=csr)
