"""A certificate's download tokens (operators): create (shown once), list, revoke.

The tokens listed are the certificate's own and the name-pattern tokens whose glob matches
it; pattern tokens are created through the API (/api/v1/downloadtokens/).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from django import forms
from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from console.web import shown_once
from console.web.access import permission_required, render_page
from issuance.access.apitokens import NAME_MAX, TokenError
from issuance.delivery.downloadtokens import (
    PASSWORD_MAX,
    create_download_token,
    revoke_download_token,
)
from issuance.delivery.formats import offered_files
from issuance.models import Certificate, DownloadToken


class NewDownloadTokenForm(forms.Form):
    name = forms.CharField(max_length=NAME_MAX, help_text="what or who uses it (e.g. web1 nginx)")
    keystore_password = forms.CharField(
        max_length=PASSWORD_MAX,
        required=False,
        widget=forms.PasswordInput(render_value=False),
        label="Keystore password",
        help_text="for keystore.p12 / keystore.jks (optional; else the spec's passwordSecretRef)",
    )


def _certificate(name: str) -> Certificate:
    return get_object_or_404(Certificate.objects.only("name", "spec"), name=name)


def _context(cert: Certificate, form: NewDownloadTokenForm | None = None) -> dict[str, Any]:
    tokens = DownloadToken.objects.defer("digest", "keystore_password_ciphertext")
    own = list(tokens.filter(certificate=cert))
    patterns = [
        t
        for t in tokens.filter(certificate__isnull=True, revoked_at__isnull=True)
        if fnmatchcase(cert.name, t.name_pattern)
    ]
    return {
        "cert": cert,
        "tokens": own,
        "pattern_tokens": patterns,
        "files": offered_files(cert.typed_spec),
        "form": form or NewDownloadTokenForm(),
    }


@never_cache
@permission_required("download-token", "read", post="create")
def download_tokens(request: HttpRequest, name: str) -> HttpResponse:
    cert = _certificate(name)
    if request.method == "GET":
        context = _context(cert)
        created = shown_once.take(request, f"download-token:{cert.name}")
        if created is not None:
            context.update(
                created=DownloadToken.objects.filter(pk=created["id"]).defer("digest").first(),
                token_text=created["secret"],
                base_url=request.build_absolute_uri("/"),
            )
        return render_page(request, "console/certificates/downloads.html", context)
    form = NewDownloadTokenForm(request.POST)
    if request.method == "POST" and form.is_valid():
        try:
            token, text = create_download_token(
                form.cleaned_data["name"],
                actor=request.user.get_username(),
                certificate=cert,
                keystore_password=form.cleaned_data["keystore_password"],
            )
        except TokenError as exc:
            form.add_error("name", str(exc))
        else:
            # Post/redirect/get: the page shows the token once (console/web/shown_once.py).
            shown_once.keep(request, f"download-token:{cert.name}", token.pk, text)
            return redirect("web:certificate-downloads", name=cert.name)
    return render_page(
        request, "console/certificates/downloads.html", _context(cert, form), status=400
    )


@require_POST
@permission_required("download-token", "revoke")
def download_token_revoke(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    cert = _certificate(name)
    if not DownloadToken.objects.filter(pk=pk, certificate=cert).exists():
        raise Http404("no such token")
    token = revoke_download_token(pk, actor=request.user.get_username())
    messages.success(request, f"Download token {token.name} ({token.prefix}…) revoked.")
    return redirect("web:certificate-downloads", name=cert.name)
