"""The Endpoints card of a certificate's page: add and remove endpoints, "Check now"
(operator); viewers see each endpoint's last probe. Through issuance.probing.endpoints, as
the API and certctl do."""

from __future__ import annotations

from dataclasses import replace

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from console.web.access import permission_required
from console.web.certificates import _get_certificate
from console.web.forms import EndpointForm
from issuance.models import Endpoint
from issuance.probing import endpoints

# The form's field for each of issuance.probing.endpoints' field names.
_FIELDS = {
    "host": "address",
    "port": "address",
    "serverName": "server_name",
    "protocol": "protocol",
}


@require_POST
@permission_required("endpoint", "create")
def endpoint_add(request: HttpRequest, name: str) -> HttpResponse:
    cert = _get_certificate(name)
    form = EndpointForm(request.POST)
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(
                request, f"{form.fields[field].label or field}: {' '.join(str(e) for e in errors)}"
            )
        return redirect("web:certificate-detail", name=cert.name)
    data = form.cleaned_data
    try:
        given = endpoints.parse_address(data["address"])
        endpoint = endpoints.add(
            cert,
            replace(given, server_name=data["server_name"], protocol=data["protocol"]),
            actor=request.user.get_username(),
        )
    except endpoints.EndpointError as exc:
        for field, problem in exc.errors.items():
            label = form.fields[_FIELDS.get(field, "address")].label
            messages.error(request, f"{label}: {problem}")
    else:
        messages.success(request, f"Endpoint {endpoint.address} added; it is probed in a moment.")
    return redirect("web:certificate-detail", name=cert.name)


@require_POST
@permission_required("endpoint", "delete")
def endpoint_remove(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    cert = _get_certificate(name)
    endpoint = get_object_or_404(Endpoint, certificate=cert, pk=pk)
    endpoints.remove(endpoint, actor=request.user.get_username())
    messages.success(request, f"Endpoint {endpoint.address} removed.")
    return redirect("web:certificate-detail", name=cert.name)


@require_POST
@permission_required("endpoint", "check")
def endpoint_check(request: HttpRequest, name: str) -> HttpResponse:
    cert = _get_certificate(name)
    count = endpoints.check_now(cert, actor=request.user.get_username())
    if count:
        messages.success(
            request,
            f"Check of {count} endpoint{'s' if count != 1 else ''} requested; "
            "the results appear here within seconds.",
        )
    else:
        messages.error(request, "This certificate has no endpoints to check.")
    return redirect("web:certificate-detail", name=cert.name)
