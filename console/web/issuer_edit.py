"""Issuers made, changed and deleted in the console (admin role): the form's fields become
a spec (console/web/issuer_forms.py), applied with the API's own function
(issuance.specs.apply_issuer_ex), whose SpecError field paths are shown next to the field
they are about. Nothing is stored when the spec is refused."""

from __future__ import annotations

import base64
from collections import defaultdict
from typing import Any

from django.contrib import messages
from django.db import transaction
from django.db.models import ProtectedError
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.web import issuer_forms as forms
from console.web.access import permission_required, render_page
from issuance.acme.issuer_spec import EAB_ALGORITHMS
from issuance.acme.protocol.client import TLSOptions
from issuance.acme.protocol.directory import DirectoryError, DirectoryMeta, fetch_directory_meta
from issuance.models import Certificate, CertificateRequest, Issuer
from issuance.observability import events
from issuance.specs import apply_issuer_ex
from issuance.specs.errors import SpecError

# Certificates named on the delete page; the count is always the whole number.
DELETE_LISTED = 20
TOS_REQUIRED = "accept the CA's terms of service to save"


def _directory(data: QueryDict) -> tuple[DirectoryMeta | None, str]:
    """The directory of the server in the form (a preset's or the custom URL), read now."""
    preset = forms.PRESETS_BY_KEY.get(str(data.get("preset") or ""))
    server = preset.url if preset else str(data.get("server") or "").strip()
    if not server:
        return None, "enter the directory URL first"
    bundle = "" if preset else str(data.get("ca_bundle") or "").strip()
    if bundle.startswith("-----BEGIN"):
        bundle = base64.b64encode(bundle.encode()).decode()
    try:
        return fetch_directory_meta(server, TLSOptions(ca_bundle_b64=bundle)), ""
    except DirectoryError as exc:
        return None, str(exc)


def _form_context(
    values: dict[str, Any],
    errors: dict[str, list[str]],
    *,
    issuer: Issuer | None,
    meta: DirectoryMeta | None = None,
    directory_error: str = "",
) -> dict[str, Any]:
    profiles = dict(meta.profiles) if meta else {}
    current = str(values.get("profile") or "")
    if current and current not in profiles:
        profiles[current] = "(stored; load the directory to see what the CA offers)"
    return {
        "issuer": issuer,
        "v": values,
        "errors": errors,
        "e": defaultdict(list, errors),
        "general_errors": errors.get("", []),
        "presets": forms.PRESETS,
        "kinds": forms.KINDS,
        "ca_modes": [m for m in forms.CA_MODES if issuer is not None or m[0] != "keep"],
        "eab_algorithms": EAB_ALGORITHMS,
        "providers": forms.PROVIDER_LABELS,
        "solver_slots": forms.solver_slots(values, errors),
        "meta": meta,
        "profiles": profiles,
        "directory_error": directory_error,
    }


def _needs_tos(data: QueryDict, issuer: Issuer | None) -> bool:
    """An ACME issuer is saved only with its CA's terms accepted: when it is made, and
    when its server changes."""
    if str(data.get("kind")) != "acme":
        return False
    if issuer is None or issuer.kind != "acme":
        return True
    preset = forms.PRESETS_BY_KEY.get(str(data.get("preset") or ""))
    server = preset.url if preset else str(data.get("server") or "").strip()
    return server != str(issuer.acme_spec.get("server") or "")


def _save(request: HttpRequest, issuer: Issuer | None) -> dict[str, list[str]]:
    """Apply the POSTed form; the errors by form field ({} when it was saved)."""
    data = request.POST
    name = issuer.name if issuer else str(data.get("name") or "").strip()
    errors: dict[str, list[str]] = {}
    if issuer is None and Issuer.objects.filter(name=name).exists():
        errors["name"] = [f"an issuer named {name!r} already exists"]
    if _needs_tos(data, issuer) and not data.get("accept_tos"):
        errors["accept_tos"] = [TOS_REQUIRED]
    preset = forms.PRESETS_BY_KEY.get(str(data.get("preset") or ""))
    if (
        str(data.get("kind")) == "acme"
        and preset
        and preset.needs_eab
        and not str(data.get("eab_key_id") or "").strip()
    ):
        errors["eab_key_id"] = [f"{preset.label} requires External Account Binding (key ID)"]
    old_spec = issuer.spec if issuer and str(data.get("kind")) == issuer.kind else {}
    spec = forms.spec_from_post(data, old_spec)
    if not errors:
        try:
            applied = apply_issuer_ex(
                name,
                spec,
                cluster=bool(data.get("cluster")),
                actor=request.user.get_username(),
            )
        except SpecError as exc:
            errors = forms.errors_by_field(exc.errors)
        else:
            if _needs_tos(data, issuer):
                events.record(
                    "Issuer",
                    name,
                    "TermsOfServiceAccepted",
                    f"The terms of service of {applied.obj.acme_spec.get('server')} were "
                    "accepted in the console",
                    actor=request.user.get_username(),
                )
            verb = "created" if applied.created else "saved"
            messages.success(request, f"Issuer {name} {verb}.")
    return errors


def _form_page(request: HttpRequest, issuer: Issuer | None) -> HttpResponse:
    if issuer is not None:
        stored = forms.values_from_spec(issuer.kind, issuer.spec)
        stored.update(name=issuer.name, cluster=issuer.cluster_scoped)
    else:
        stored = {"kind": "acme", "preset": "letsencrypt-staging", "solvers": []}
        stored["server"] = forms.PRESETS_BY_KEY["letsencrypt-staging"].url
    meta: DirectoryMeta | None = None
    directory_error = ""
    errors: dict[str, list[str]] = {}
    values = stored
    if request.method == "POST":
        values = forms.values_from_post(request.POST, stored)
        if request.POST.get("_action") == "directory":
            meta, directory_error = _directory(request.POST)
        else:
            errors = _save(request, issuer)
            if not errors:
                return redirect("web:issuers")
    context = _form_context(
        values, errors, issuer=issuer, meta=meta, directory_error=directory_error
    )
    response = render_page(request, "console/issuers/form.html", context)
    if errors:
        response.status_code = 400
    return response


@permission_required("issuer", "create")
def issuer_new(request: HttpRequest) -> HttpResponse:
    return _form_page(request, None)


@permission_required("issuer", "change")
def issuer_edit(request: HttpRequest, name: str) -> HttpResponse:
    return _form_page(request, get_object_or_404(Issuer, name=name))


@require_POST
@permission_required("issuer", "create")
def issuer_directory(request: HttpRequest) -> HttpResponse:
    """ "Load profiles": the directory section of the form, for console/static/js/console-issuers.js
    to put in place without reloading the page (the same as the form's own button)."""
    meta, directory_error = _directory(request.POST)
    values = {"profile": str(request.POST.get("profile") or "")}
    context = _form_context(values, {}, issuer=None, meta=meta, directory_error=directory_error)
    return render(request, "console/issuers/directory.html", context)


@permission_required("issuer", "delete")
def issuer_delete(request: HttpRequest, name: str) -> HttpResponse:
    """GET: what deleting means (how many certificates use the issuer; refused while any
    do, as the API's 409). POST (CSRF-checked): delete, as the API does."""
    issuer = get_object_or_404(Issuer, name=name)
    using = Certificate.objects.filter(issuer=issuer)
    count = using.count()
    # Requests of no certificate (bootstrap clients, Kubernetes CSRs) hold the issuer too.
    other_requests = CertificateRequest.objects.filter(
        issuer=issuer, certificate__isnull=True
    ).count()
    if request.method == "POST":
        if count or other_requests:
            messages.error(request, f"Issuer {name} is in use; not deleted.")
            return redirect("web:issuer-delete", name=name)
        try:
            with transaction.atomic():
                issuer.delete()
                events.record(
                    "Issuer", name, "Deleted", "Issuer deleted", actor=request.user.get_username()
                )
        except ProtectedError:
            # Something was made for it since the page was shown.
            messages.error(request, f"Issuer {name} is now in use; not deleted.")
            return redirect("web:issuer-delete", name=name)
        messages.success(request, f"Issuer {name} deleted.")
        return redirect("web:issuers")
    names = list(using.order_by("name").values_list("name", flat=True)[:DELETE_LISTED])
    context = {
        "issuer": issuer,
        "count": count,
        "names": names,
        "other_requests": other_requests,
    }
    return render_page(request, "console/issuers/delete.html", context)
