"""HTTP-01 token answers at /.well-known/acme-challenge/<token>. Placeholder (issue 3)."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse


def acme_challenge(request: HttpRequest, token: str) -> HttpResponse:
    raise Http404("no such challenge")
