"""API tokens (every signed-in user, their own): create with a name (shown once), revoke.

Lists name, prefix, created and last used; the token itself exists only in the response
that created it (issuance/access/apitokens.py stores its SHA-256).
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web import shown_once
from console.web.access import permission_required, render_page
from issuance.access import apitokens
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
@permission_required("api-token", "read")
def token_list(request: HttpRequest) -> HttpResponse:
    context = _context(request)
    created = shown_once.take(request, "api-token")
    if created is not None:
        context["created"] = ApiToken.objects.filter(pk=created["id"]).defer("digest").first()
        context["token_text"] = created["secret"]
    return render_page(request, "console/tokens.html", context)


@require_POST
@never_cache
@permission_required("api-token", "create")
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
            # Post/redirect/get: the list shows the token once (console/web/shown_once.py).
            shown_once.keep(request, "api-token", token.pk, text)
            return redirect("web:tokens")
    return render_page(request, "console/tokens.html", _context(request, form), status=400)


@require_POST
@permission_required("api-token", "revoke")
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    try:
        token = apitokens.revoke_token(_me(request), pk, actor=request.user.get_username())
    except ApiToken.DoesNotExist as exc:
        raise Http404("no such token") from exc
    messages.success(request, f"Token {token.name} ({token.prefix}…) revoked.")
    return redirect("web:tokens")
