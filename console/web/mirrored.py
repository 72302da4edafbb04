"""Detail pages of mirrored cert-manager objects, and the buttons that act on them.

A mirrored Certificate's page: its status and conditions, issuer, renewal time
(status.renewalTime), the computed next retry with a live countdown, failed attempts; its
CertificateRequests, Orders and Challenges (rows with the same cluster, namespace and
certificate_name); its timeline, the Kubernetes Events of the object and its children,
newest first; Force renew for operators in scope. A CertificateRequest's page: conditions,
the decoded CSR, Approve/Deny for approvers in scope. Orders, Challenges, Issuers and
ClusterIssuers: read-only.

Objects outside the user's scope answer 404, as if they did not exist; inside the scope
without the role, buttons are not shown and their POSTs answer 403. The buttons queue a
ClusterAction through issuance.kubernetes.certmanager.cluster_actions (written back by the sync's writeback).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from console.web.access import (
    check_in_scope,
    mirror_flags,
    permission_required,
    render_page,
    role_flags,
)
from console.web.forms import DecisionForm
from console.web.mirrored_lists import decode_request
from issuance.access.scope import cluster_topic, namespace_topic, visible
from issuance.kubernetes.certmanager import cluster_actions
from issuance.models import ClusterAction, ClusterEvent, ClusterResource, MirroredKind
from issuance.operations.actions import ActionError

CHILDREN_LIMIT = 100
TIMELINE_LIMIT = 100
RECENT_ACTIONS = 5

# URL segment -> kind; the same plural names as the Kubernetes API.
KIND_PATHS: dict[str, str] = {
    "certificates": MirroredKind.CERTIFICATE,
    "certificaterequests": MirroredKind.CERTIFICATE_REQUEST,
    "orders": MirroredKind.ORDER,
    "challenges": MirroredKind.CHALLENGE,
    "issuers": MirroredKind.ISSUER,
}
PATH_OF_KIND = {kind: path for path, kind in KIND_PATHS.items()}
# The parts of a Certificate page that live.js re-fetches.
CERTIFICATE_PARTS = ("status", "children", "timeline")


def detail_url(resource: ClusterResource) -> str:
    """Where a mirrored object's page is (lists and the timeline link to it)."""
    if resource.kind == MirroredKind.CLUSTER_ISSUER:
        return reverse("web:mirrored-clusterissuer", args=[resource.cluster.name, resource.name])
    return reverse(
        "web:mirrored-object",
        args=[
            resource.cluster.name,
            resource.namespace,
            PATH_OF_KIND[resource.kind],
            resource.name,
        ],
    )


def get_resource(
    request: HttpRequest, cluster: str, namespace: str, kind: str, name: str
) -> ClusterResource:
    """The object, if it is mirrored and inside the user's scope; 404 otherwise."""
    found = (
        visible(
            ClusterResource.objects.filter(
                cluster__name=cluster, namespace=namespace, kind=kind, name=name
            ),
            request.user,
        )
        .select_related("cluster")
        .defer("cluster__kubeconfig_ciphertext")
        # A recreated object can briefly have two rows (new uid) until the delete arrives.
        .order_by("-observed_at", "-id")
        .first()
    )
    if found is None:
        raise Http404("no such object")
    return found


def _live_topic(resource: ClusterResource) -> str:
    if resource.namespace:
        return namespace_topic(resource.cluster.name, resource.namespace)
    return cluster_topic(resource.cluster.name)


# -- parts ------------------------------------------------------------------------------


def _condition(resource: ClusterResource, type_: str) -> dict[str, Any] | None:
    return next((c for c in resource.conditions if c.get("type") == type_), None)


def _children(resource: ClusterResource) -> list[ClusterResource]:
    """The Certificate's CertificateRequests, Orders and Challenges (one query)."""
    return list(
        ClusterResource.objects.filter(
            cluster_id=resource.cluster_id,
            namespace=resource.namespace,
            certificate_name=resource.name,
        )
        .exclude(kind=MirroredKind.CERTIFICATE)
        .select_related("cluster")
        .defer("cluster__kubeconfig_ciphertext")
        .order_by("kind", "-observed_at", "name")[:CHILDREN_LIMIT]
    )


def _timeline(resource: ClusterResource, children: list[ClusterResource]) -> list[ClusterEvent]:
    """The Kubernetes Events of the object and of its children, newest first."""
    about = Q(involved_kind=resource.kind, involved_name=resource.name)
    for child in children:
        about |= Q(involved_kind=child.kind, involved_name=child.name)
    return list(
        ClusterEvent.objects.filter(
            about, cluster_id=resource.cluster_id, namespace=resource.namespace
        ).order_by("-last_seen", "-id")[:TIMELINE_LIMIT]
    )


def _recent_actions(resource: ClusterResource) -> list[ClusterAction]:
    return list(
        ClusterAction.objects.filter(
            cluster_id=resource.cluster_id,
            kind=resource.kind,
            namespace=resource.namespace,
            name=resource.name,
        ).order_by("-created_at")[:RECENT_ACTIONS]
    )


def _certificate_part(resource: ClusterResource, part: str) -> dict[str, Any]:
    if part == "status":
        return {
            "ready": _condition(resource, "Ready"),
            "issuing": _condition(resource, "Issuing"),
            "recent_actions": _recent_actions(resource),
        }
    if part == "children":
        return {"children": [(c, detail_url(c)) for c in _children(resource)]}
    if part == "timeline":
        return {"events": _timeline(resource, _children(resource))}
    raise Http404(part)


def _request_status(resource: ClusterResource) -> dict[str, Any]:
    csr, csr_error = decode_request(resource)
    return {
        "csr": csr,
        "csr_error": csr_error,
        "recent_actions": _recent_actions(resource),
        "pending": not resource.state,  # neither Approved nor Denied yet
    }


def _base_context(request: HttpRequest, resource: ClusterResource) -> dict[str, Any]:
    return {
        "resource": resource,
        "cluster_name": resource.cluster.name,
        "live_topic": _live_topic(resource),
        **mirror_flags(request, resource.cluster.name, resource.namespace),
    }


# -- pages ------------------------------------------------------------------------------


@permission_required("mirrored-object", "read")
def mirrored_object(
    request: HttpRequest, cluster: str, namespace: str, kind_path: str, name: str
) -> HttpResponse:
    kind = KIND_PATHS.get(kind_path)
    if kind is None:
        raise Http404(kind_path)
    resource = get_resource(request, cluster, namespace, kind, name)
    context = _base_context(request, resource)
    if kind == MirroredKind.CERTIFICATE:
        children = _children(resource)
        context.update(_certificate_part(resource, "status"))
        context["children"] = [(c, detail_url(c)) for c in children]
        context["events"] = _timeline(resource, children)
        template = "console/mirrored/certificate.html"
    elif kind == MirroredKind.CERTIFICATE_REQUEST:
        context.update(_request_status(resource))
        context.update(events=_timeline(resource, []), certificate_url=_certificate_url(resource))
        template = "console/mirrored/request.html"
    else:
        context.update(events=_timeline(resource, []), certificate_url=_certificate_url(resource))
        template = "console/mirrored/object.html"
    return render_page(request, template, context, live_groups=_live_topic(resource))


def _certificate_url(resource: ClusterResource) -> str:
    if not resource.certificate_name or resource.kind == MirroredKind.CERTIFICATE:
        return ""
    return reverse(
        "web:mirrored-certificate",
        args=[resource.cluster.name, resource.namespace, resource.certificate_name],
    )


@permission_required("mirrored-object", "read")
def mirrored_clusterissuer(request: HttpRequest, cluster: str, name: str) -> HttpResponse:
    resource = get_resource(request, cluster, "", MirroredKind.CLUSTER_ISSUER, name)
    context = {**_base_context(request, resource), "events": _timeline(resource, [])}
    return render_page(
        request, "console/mirrored/object.html", context, live_groups=_live_topic(resource)
    )


@permission_required("mirrored-object", "read")
def mirrored_certificate(
    request: HttpRequest, cluster: str, namespace: str, name: str
) -> HttpResponse:
    return mirrored_object(request, cluster, namespace, "certificates", name)


@permission_required("mirrored-object", "read")
def mirrored_certificate_partial(
    request: HttpRequest, cluster: str, namespace: str, name: str, part: str
) -> HttpResponse:
    if part not in CERTIFICATE_PARTS:
        raise Http404(part)
    resource = get_resource(request, cluster, namespace, MirroredKind.CERTIFICATE, name)
    context = {
        **role_flags(request),
        **_base_context(request, resource),
        **_certificate_part(resource, part),
    }
    return render(request, f"console/partials/mirrored_certificate_{part}.html", context)


@permission_required("mirrored-object", "read")
def mirrored_request_partial(
    request: HttpRequest, cluster: str, namespace: str, name: str
) -> HttpResponse:
    resource = get_resource(request, cluster, namespace, MirroredKind.CERTIFICATE_REQUEST, name)
    context = {
        **role_flags(request),
        **_base_context(request, resource),
        **_request_status(resource),
    }
    return render(request, "console/partials/mirrored_request_status.html", context)


# -- actions ----------------------------------------------------------------------------


def _require_scoped(request: HttpRequest, action: str, resource: ClusterResource) -> None:
    check_in_scope(request, "mirrored-object", action, resource.cluster.name, resource.namespace)


@require_POST
@permission_required("mirrored-object", "renew")
def mirrored_renew(request: HttpRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    resource = get_resource(request, cluster, namespace, MirroredKind.CERTIFICATE, name)
    _require_scoped(request, "renew", resource)
    message = request.POST.get("message", "").strip()[:1024]
    try:
        cluster_actions.request_renew(resource, request.user, message=message)
    except ActionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Renewal of {resource.name} requested; it is written to the cluster next."
        )
    return redirect(detail_url(resource))


def _decide(
    request: HttpRequest, cluster: str, namespace: str, name: str, decision: str
) -> HttpResponse:
    resource = get_resource(request, cluster, namespace, MirroredKind.CERTIFICATE_REQUEST, name)
    _require_scoped(request, "approve" if decision == "Approved" else "deny", resource)
    back = request.POST.get("next") == "queue"
    target = reverse("web:requests") if back else detail_url(resource)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{resource.name}: {field}: {' '.join(str(e) for e in errors)}")
        return redirect(target)
    try:
        cluster_actions.request_decision(
            resource,
            request.user,
            decision,
            reason=form.cleaned_data["reason"],
            message=form.cleaned_data["message"],
        )
    except ActionError as exc:
        messages.error(request, str(exc))
    else:
        verb = "Approval" if decision == "Approved" else "Denial"
        messages.success(request, f"{verb} of {resource.name} requested.")
    return redirect(target)


@require_POST
@permission_required("mirrored-object", "approve")
def mirrored_approve(request: HttpRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    return _decide(request, cluster, namespace, name, "Approved")


@require_POST
@permission_required("mirrored-object", "deny")
def mirrored_deny(request: HttpRequest, cluster: str, namespace: str, name: str) -> HttpResponse:
    return _decide(request, cluster, namespace, name, "Denied")
