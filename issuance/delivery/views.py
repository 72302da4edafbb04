"""GET /download/<certificate>/<file>: a certificate's current key pair for a scoped token.

`Authorization: Bearer <download token>` only (not sessions, not API tokens). No token, a
wrong or revoked one: 401. A certificate outside the token's scope answers exactly as one
that does not exist (404), so a token does not reveal which certificates exist. `ETag` is
the revision, the leaf's serial and the file (and, for keystores, a digest of the password,
so a new password is a new download); `If-None-Match` with it answers 304. Each 200 is
recorded in the certificate's timeline (token name, file, client address); 304s are not
(an agent on a timer would fill the timeline with them), but they mark the token used.
"""

from __future__ import annotations

import hashlib
import logging

from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from issuance.access.apitokens import mark_used
from issuance.delivery.downloadtokens import active_token, in_scope, keystore_password
from issuance.delivery.formats import (
    KEYSTORE_FILES,
    FormatError,
    KeyPair,
    content_type,
    offered_files,
    render,
)
from issuance.models import Certificate, Secret
from issuance.observability import events
from issuance.pki.x509 import load_leaf
from issuance.specs.secret_refs import SecretRefError, read_secret_value

log = logging.getLogger(__name__)
NOT_FOUND = "not found\n"


def _plain(status: int, text: str) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


def _unauthorized() -> HttpResponse:
    response = _plain(401, "a valid download token is required (Authorization: Bearer <token>)\n")
    response["WWW-Authenticate"] = 'Bearer realm="download"'
    return response


@never_cache
@require_GET
def download(request: HttpRequest, name: str, filename: str) -> HttpResponse:
    scheme, _, text = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not text.strip():
        return _unauthorized()
    token = active_token(text.strip())
    if token is None:
        return _unauthorized()
    mark_used(token)
    if not in_scope(token, name):
        return _plain(404, NOT_FOUND)
    cert = Certificate.objects.filter(name=name).first()
    if cert is None:
        return _plain(404, NOT_FOUND)
    if filename not in offered_files(cert.typed_spec):
        return _plain(404, f"{filename!r} is not offered for this certificate\n")
    secret = Secret.objects.filter(name=cert.secret_name).first()
    if secret is None or not secret.tls_crt:
        return _plain(404, "not issued yet\n")
    password = ""
    if filename in KEYSTORE_FILES:
        try:
            password = _password(
                token_password=keystore_password(token), cert=cert, filename=filename
            )
        except SecretRefError as exc:
            return _plain(409, f"no keystore password: {exc}\n")
    etag = _etag(cert, secret, filename, password)
    if etag in _if_none_match(request):
        response = HttpResponse(status=304)
        response["ETag"] = etag
        return response
    try:
        body = render(
            filename,
            KeyPair(secret.tls_crt, secret.tls_key, secret.ca_crt),
            cert.typed_spec,
            password,
        )
    except FormatError as exc:
        return _plain(409, f"{exc}\n")
    address = request.META.get("REMOTE_ADDR", "")
    events.record(
        "Certificate",
        cert.name,
        "Downloaded",
        f"{filename} (revision {cert.revision}) downloaded with token {token.name!r} from {address}",
        actor=f"download-token:{token.name}",
        certificate_name=cert.name,
    )
    response = HttpResponse(body, content_type=content_type(filename))
    response["ETag"] = etag
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _password(*, token_password: str, cert: Certificate, filename: str) -> str:
    """The token's own password, else the spec's passwordSecretRef (a stored Secret)."""
    if token_password:
        return token_password
    kind = KEYSTORE_FILES[filename]
    keystores = cert.typed_spec.get("keystores") or {}
    store = keystores.get("pkcs12") if kind == "pkcs12" else keystores.get("jks")
    ref = store.get("passwordSecretRef") if store else None
    if not ref:
        raise SecretRefError(f"keystores.{kind}.passwordSecretRef is not set")
    return read_secret_value(ref["name"], ref.get("key"))


def _etag(cert: Certificate, secret: Secret, filename: str, password: str) -> str:
    serial = format(load_leaf(secret.tls_crt).serial_number, "x")
    tag = f"{cert.revision or 0}-{serial}-{filename}"
    if password:
        tag += "-" + hashlib.sha256(f"{tag}:{password}".encode()).hexdigest()[:12]
    return f'"{tag}"'


def _if_none_match(request: HttpRequest) -> set[str]:
    header = request.headers.get("If-None-Match", "")
    return {part.strip().removeprefix("W/") for part in header.split(",") if part.strip()}
