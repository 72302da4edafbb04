"""HTTP-01 token answers at /.well-known/acme-challenge/<token> from the web app."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from issuance.solvers.http01 import key_authorization_for


@require_safe
@never_cache
def acme_challenge(request: HttpRequest, token: str) -> HttpResponse:
    key = key_authorization_for(token)
    if key is None:
        raise Http404("no such challenge")
    return HttpResponse(key, content_type="text/plain")
