"""Certificate edit (with a preview of what the change does), clone, delete, and bulk actions
(renew or delete the selected certificates, with live progress). Operator role; every action
goes through issuance.specs / issuance.operations.actions / issuance.operations.bulk, as the API does."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from console.web.access import permission_required, render_page
from console.web.certificates import _filtered, _get_certificate
from console.web.forms import (
    BulkForm,
    CertificateFilterForm,
    DeleteCertificateForm,
    NewCertificateForm,
)
from issuance.models import BulkAction, BulkItem, Certificate
from issuance.observability.publish import bulk_topic
from issuance.operations import actions, bulk
from issuance.specs.certificate import CertificateExists, apply_certificate_ex
from issuance.specs.certificate_preview import preview_certificate_change
from issuance.specs.errors import SpecError

# The confirmation page of a bulk action lists at most this many names (all are kept).
CONFIRM_LISTED = 100


def _actor(request: HttpRequest) -> str:
    return request.user.get_username()


def _digest(spec: dict[str, Any]) -> str:
    """Names the spec a preview was shown for: Save only stores what was previewed."""
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:20]


# -- edit -----------------------------------------------------------------------------------


@permission_required("certificate", "change")
def certificate_edit(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the create form's fields, prefilled. POST "preview": what saving would do (from
    the certificates controller's own rule). POST "save": stored, if it is what was
    previewed; otherwise previewed again."""
    cert = _get_certificate(name)
    initial = NewCertificateForm.initial_from(cert.name, cert.spec)
    form = NewCertificateForm(
        {**request.POST.dict(), "name": cert.name} if request.method == "POST" else None,
        initial=initial,
    )
    form.fields["name"].disabled = True
    context: dict[str, Any] = {"cert": cert, "form": form}
    if request.method == "POST" and form.is_valid():
        spec = form.spec_over(cert.spec)
        try:
            preview = preview_certificate_change(cert, spec)
            digest = _digest(dict(preview.spec))
            if "save" in request.POST and request.POST.get("previewed") == digest:
                apply_certificate_ex(cert.name, spec, actor=_actor(request))
                messages.success(request, f"Certificate {cert.name} saved. {preview.summary}")
                return redirect("web:certificate-detail", name=cert.name)
        except SpecError as exc:
            form.add_spec_errors(exc.errors)
        else:
            context.update(preview=preview, previewed=digest)
    return render_page(request, "console/certificates/edit.html", context)


# -- clone ------------------------------------------------------------------------------------


def _free_name(base: str) -> str:
    taken = set(
        Certificate.objects.filter(name__startswith=f"{base}-copy").values_list("name", flat=True)
    )
    for i in range(1, 1000):
        candidate = f"{base}-copy" if i == 1 else f"{base}-copy-{i}"
        if candidate not in taken:
            return candidate[:253]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@permission_required("certificate", "create")
def certificate_clone(request: HttpRequest, name: str) -> HttpResponse:
    """The create form prefilled from an existing certificate, with a new name; what the form
    does not show (usages, subject, renewal windows, labels, ...) is copied too."""
    source = _get_certificate(name)
    base = {k: v for k, v in source.spec.items() if k != "secretName"}
    initial = NewCertificateForm.initial_from(_free_name(source.name), base)
    form = NewCertificateForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        new_name = form.cleaned_data["name"]
        spec = form.spec_over(base)
        spec["secretName"] = f"{new_name}-tls"
        try:
            apply_certificate_ex(
                new_name, spec, actor=_actor(request), create_only=True, labels=source.labels
            )
        except CertificateExists:
            form.add_error("name", f"a certificate named {new_name!r} already exists")
        except SpecError as exc:
            form.add_spec_errors(exc.errors)
        else:
            messages.success(request, f"Certificate {new_name} created from {source.name}.")
            return redirect("web:certificate-detail", name=new_name)
    context = {"form": form, "clone_of": source}
    return render_page(request, "console/certificates/new.html", context)


# -- delete -----------------------------------------------------------------------------------


@permission_required("certificate", "delete")
def certificate_delete(request: HttpRequest, name: str) -> HttpResponse:
    """GET: the confirmation (what goes, and the choice to keep the Secret). POST: deleted."""
    cert = _get_certificate(name)
    form = DeleteCertificateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        delete_secret = form.cleaned_data["key_pair"] == "remove"
        try:
            actions.delete_certificate(cert, _actor(request), delete_secret=delete_secret)
        except actions.ActionError as exc:
            messages.error(request, str(exc))
        else:
            kept = "deleted" if delete_secret else "kept"
            messages.success(request, f"Certificate {cert.name} deleted; its Secret was {kept}.")
        return redirect("web:certificates")
    requests = cert.requests.count()
    context = {"cert": cert, "form": form, "request_count": requests}
    return render_page(request, "console/certificates/delete.html", context)


# -- bulk actions -------------------------------------------------------------------------------


@require_POST
@permission_required("certificate", "bulk")
def bulk_start(request: HttpRequest) -> HttpResponse:
    """From the list's checkboxes: first a confirmation page, then the action is stored and
    its progress page opens (which carries it out, chunk by chunk)."""
    form = BulkForm(request.POST)
    names = [n for n in request.POST.getlist("names") if n]
    if request.POST.get("all_matching"):
        # Every certificate the list's filter matched, on every page (not only the
        # checked rows of the page shown), resolved now, on the database.
        matching = _filtered(CertificateFilterForm(QueryDict(request.POST.get("filter", ""))))
        names = list(matching.values_list("name", flat=True)[: bulk.MAX_ITEMS])
    if not form.is_valid() or not names:
        messages.error(request, "Select at least one certificate, then an action.")
        return redirect("web:certificates")
    kind = form.cleaned_data["kind"]
    if "confirm" not in request.POST:
        context = {
            "form": form,
            "kind": kind,
            "names": names,
            "listed": names[:CONFIRM_LISTED],
            "unlisted": max(0, len(names) - CONFIRM_LISTED),
        }
        return render_page(request, "console/certificates/bulk_confirm.html", context)
    try:
        action = bulk.create(
            kind,
            names,
            _actor(request),
            delete_secrets=kind == "delete" and form.cleaned_data.get("key_pair") == "remove",
        )
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("web:certificates")
    return redirect("web:bulk-detail", action_id=action.id)


def _own_action(request: HttpRequest, action_id: uuid.UUID) -> BulkAction:
    action = get_object_or_404(BulkAction, pk=action_id)
    if not bulk.may_watch(request.user, action.id.hex):
        raise PermissionDenied("only who started a bulk action (or an admin) may see it")
    return action


def _bulk_context(action: BulkAction) -> dict[str, Any]:
    items = BulkItem.objects.filter(action=action).exclude(state="pending").order_by("position")
    return {"action": action, "items": list(items)}


@permission_required("certificate", "bulk")
def bulk_detail(request: HttpRequest, action_id: uuid.UUID) -> HttpResponse:
    action = _own_action(request, action_id)
    context = _bulk_context(action)
    context["drive"] = action.finished_at is None and action.actor == _actor(request)
    return render_page(
        request,
        "console/certificates/bulk.html",
        context,
        live_groups=bulk_topic(action.id),
    )


@permission_required("certificate", "bulk")
def bulk_partial(request: HttpRequest, action_id: uuid.UUID) -> HttpResponse:
    action = _own_action(request, action_id)
    return render(request, "console/partials/bulk_results.html", _bulk_context(action))


@require_POST
@permission_required("certificate", "bulk")
def bulk_step(request: HttpRequest, action_id: uuid.UUID) -> HttpResponse:
    """Carry out the next chunk (one short transaction). JSON for the page's script; a
    redirect back to the page for the no-JavaScript "Continue" button."""
    action = bulk.run_chunk(_own_action(request, action_id).id)
    if request.headers.get("X-Requested-With") == "XMLHttpRequest":
        return JsonResponse(bulk.progress_message(action))
    return redirect("web:bulk-detail", action_id=action.id)
