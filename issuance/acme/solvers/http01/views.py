"""HTTP-01 token answers at /.well-known/acme-challenge/<token> from the web app.

The middleware answers before anything else runs: the CA asks with `Host: <the name being
validated>`, which is rarely in ALLOWED_HOSTS (CommonMiddleware would answer 400), and
HTTPS redirects, sessions or login requirements must not apply to it. The URL route stays
for reverse() and for setups that leave the middleware out.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.utils.cache import add_never_cache_headers
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from issuance.acme.solvers.http01.solver import PATH_PREFIX, key_authorization_for
from issuance.availability import DatabaseUnavailable


def _answer(token: str) -> HttpResponse:
    try:
        key = key_authorization_for(token)
    except DatabaseUnavailable:
        response = HttpResponse("database unavailable\n", status=503, content_type="text/plain")
        response["Retry-After"] = "5"
    else:
        if key is None:
            response = HttpResponse("not found\n", status=404, content_type="text/plain")
        else:
            response = HttpResponse(key, content_type="text/plain")
    add_never_cache_headers(response)
    return response


@require_safe
@never_cache
def acme_challenge(request: HttpRequest, token: str) -> HttpResponse:
    response = _answer(token)
    if response.status_code == 404:
        raise Http404("no such challenge")
    return response


class AcmeChallengeMiddleware:
    """Serve /.well-known/acme-challenge/<token> for any Host, first in MIDDLEWARE."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if not path.startswith(PATH_PREFIX):
            return self.get_response(request)
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(["GET", "HEAD"])
        return _answer(path.removeprefix(PATH_PREFIX))
