"""A CA issuer's certificate revocation list, served at /crl/<issuer>.crl (public: relying
parties fetch it without an account; it holds serials and dates, nothing secret).

Built on every fetch from the Revocation rows, signed with the CA key: a revocation shows at
once, and there is no stored CRL to go stale. Expired certificates are left out (RFC 5280
§3.3 allows it; they fail validation anyway).
"""

from __future__ import annotations

from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

from issuance.issuers.ca import CAKeyPairError, load_keypair
from issuance.models import Issuer, IssuerKind, Revocation, RevocationState
from issuance.pki.crl import RevokedEntry, build_crl

CONTENT_TYPE = "application/pkix-crl"  # RFC 5280 §4.2.1.13, RFC 2585


def crl_der(issuer: Issuer) -> bytes:
    """The issuer's current CRL (DER). Raises CAKeyPairError when its key pair is unusable."""
    now = timezone.now()
    pair = load_keypair(issuer)
    rows = (
        Revocation.objects.filter(issuer=issuer, state=RevocationState.REVOKED)
        .filter(Q(not_after__isnull=True) | Q(not_after__gt=now))
        .order_by("revoked_at", "id")
        .values_list("serial", "revoked_at", "reason")
    )
    entries = [RevokedEntry(serial, at or now, reason) for serial, at, reason in rows]
    return build_crl(pair.key, pair.chain[0], entries, now=now)


@require_safe
def crl_view(request: HttpRequest, name: str) -> HttpResponse:
    issuer = Issuer.objects.filter(name=name, kind=IssuerKind.CA).first()
    if issuer is None:
        raise Http404(f"no CA issuer named {name!r}")
    try:
        der = crl_der(issuer)
    except CAKeyPairError as exc:
        response = HttpResponse(
            f"the CA key pair of {name} is unusable: {exc}\n",
            status=503,
            content_type="text/plain",
        )
        response["Retry-After"] = "30"
        return response
    response = HttpResponse(der, content_type=CONTENT_TYPE)
    # Caches may keep it a few minutes (well inside nextUpdate), so a revocation spreads soon.
    response["Cache-Control"] = "public, max-age=300"
    return response
