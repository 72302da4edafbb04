"""Token authentication for the REST API: per-user ApiTokens looked up by their digest.

`Authorization: Token <token>`, DRF's header and errors (the class derives from DRF's, so
the OpenAPI schema describes it as DRF's `tokenAuth`). The row is found by SHA-256 of the
token (issuance/access/apitokens.py says why a fast digest), with its user, by one query compiled
once per thread.

Every API call authenticates, and compiling `ApiToken.objects.select_related("user")
.filter(digest=…)` cost Django more CPU than running it (a fifth of a certificate create in a
py-spy profile of bulk issuance, measured with DRF's Token, the same one-join query). Same
rows, same model instances, same errors.

Measured (docs/decisions/0004-bypasses.md): DRF's TokenAuthentication costs the web process
0.4 ms more per certificate, 7 % of its CPU (5.3 ms), a borderline figure within the run-to-
run noise. It becomes unnecessary if DRF's token lookup is compiled once.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions

from issuance.access import signin
from issuance.access.apitokens import digest_of, mark_used
from issuance.fastpaths.compiled_query import compiled
from issuance.models import ApiToken

# Never a digest (digests are hex): marks the digest's place in the compiled parameters.
_STAND_IN = "\x00token-digest\x00"


def _token_query(digest: str) -> QuerySet[ApiToken]:
    return ApiToken.objects.select_related("user").filter(digest=digest, revoked_at__isnull=True)


class TokenAuthentication(authentication.TokenAuthentication):
    """`Authorization: Token <token>`, with rest_framework's headers and errors."""

    model = ApiToken
    # Too many bad tokens from one address: 429 (issuance.access.signin; the schema documents it).
    limits_bad_tokens = True

    def authenticate(self, request: Any) -> tuple[AbstractBaseUser, Any] | None:
        self._request = request
        return super().authenticate(request)

    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, Any]:
        # Checked before the lookup, so a limited address learns nothing from a right guess.
        signin.check_token_address(self._request)
        found = compiled("api-token", _token_query, _STAND_IN).fetch(digest_of(key))
        if not found:
            signin.token_failed(self._request, "API")
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        token: Any = found[0]
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        mark_used(token)
        return (token.user, token)
