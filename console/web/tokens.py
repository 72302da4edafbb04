"""API tokens (every signed-in user, their own): create with a name (shown once), revoke.

Lists name, prefix, created and last used; the token itself exists only in the response
that created it (issuance/apitokens.py stores its SHA-256).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web.access import render_page
from issuance import apitokens
from issuance.models import ApiToken

PAGE_SIZE = 50


class NewTokenForm(forms.Form):
    name = forms.CharField(max_length=apitokens.NAME_MAX, help_text="what or who uses it")


def _me(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _context(request: HttpRequest, form: NewTokenForm | None = None) -> dict[str, Any]:
    mine = ApiToken.objects.filter(user=_me(request)).defer("digest")
    page = Paginator(mine, PAGE_SIZE).get_page(request.GET.get("page"))
    return {"page": page, "tokens": list(page.object_list), "form": form or NewTokenForm()}


@never_cache
@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    return render_page(request, "console/tokens.html", _context(request))


@require_POST
@never_cache
@login_required
def token_create(request: HttpRequest) -> HttpResponse:
    form = NewTokenForm(request.POST)
    if form.is_valid():
        try:
            token, text = apitokens.create_token(
                _me(request), form.cleaned_data["name"], actor=request.user.get_username()
            )
        except apitokens.TokenError as exc:
            form.add_error("name", str(exc))
        else:
            # Rendered, not redirected: the token lives in this response only.
            context = _context(request)
            context["created"] = token
            context["token_text"] = text
            return render_page(request, "console/tokens.html", context)
    return render_page(request, "console/tokens.html", _context(request, form), status=400)


@require_POST
@login_required
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        token = apitokens.revoke_token(_me(request), pk, actor=request.user.get_username())
    except ApiToken.DoesNotExist as exc:
        raise Http404("no such token") from exc
    messages.success(request, f"Token {token.name} ({token.prefix}…) revoked.")
    return redirect("web:tokens")
