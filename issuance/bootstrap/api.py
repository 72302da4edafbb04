"""The bootstrap API: a client submits CSRs and reads its own requests, nothing else.

POST /api/v1/bootstrap/certificaterequests/          submit (201)
GET  /api/v1/bootstrap/certificaterequests/          this token's requests
GET  /api/v1/bootstrap/certificaterequests/<name>/   one of them (404 for others')
"""

from __future__ import annotations

from typing import Any

from rest_framework import status
from rest_framework.exceptions import NotFound, Throttled
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from issuance.bootstrap.auth import BootstrapClient, BootstrapTokenAuthentication, IsBootstrapClient
from issuance.bootstrap.requests import TooManyPending, submit
from issuance.models import CertificateRequest


def represent(cr: CertificateRequest) -> dict[str, Any]:
    spec = {k: v for k, v in cr.spec.items()}
    return {
        "name": cr.name,
        "createdAt": cr.created_at.isoformat(),
        "spec": spec,
        "status": {
            "approval": cr.approval,
            "state": cr.state,
            "decidedBy": cr.decided_by,
            "decidedAt": cr.decided_at.isoformat() if cr.decided_at else None,
            "conditions": cr.conditions,
            "certificate": cr.certificate_pem or None,
            "ca": cr.ca_pem or None,
            "failureTime": cr.failure_time.isoformat() if cr.failure_time else None,
        },
    }


class _BootstrapView(APIView):
    authentication_classes = [BootstrapTokenAuthentication]
    permission_classes = [IsBootstrapClient]

    def own(self, request: Request) -> Any:
        client: BootstrapClient = request.user  # type: ignore[assignment]
        return CertificateRequest.objects.select_related("issuer").filter(
            source="bootstrap", requester=client.username
        )


class BootstrapRequestList(_BootstrapView):
    def get(self, request: Request) -> Response:
        items = list(self.own(request).order_by("-created_at", "-id")[:100])
        return Response({"items": [represent(cr) for cr in items]})

    def post(self, request: Request) -> Response:
        client: BootstrapClient = request.user  # type: ignore[assignment]
        try:
            cr = submit(client.token, request.data)
        except TooManyPending as exc:
            raise Throttled(detail=str(exc)) from None
        return Response(represent(cr), status=status.HTTP_201_CREATED)


class BootstrapRequestDetail(_BootstrapView):
    def get(self, request: Request, name: str) -> Response:
        cr = self.own(request).filter(name=name).first()
        if cr is None:
            # Same answer for "not yours" and "does not exist": names are not disclosed.
            raise NotFound(f"no CertificateRequest {name!r} submitted with this token")
        return Response(represent(cr))
