"""The private Django, DRF, josepy and requests APIs that the kept bypasses rely on.

Each bypass of docs/decisions/0004-bypasses.md that reaches past a library's public API is
listed here with what it uses. When an upgrade renames, removes or re-signs one of them,
the test fails naming the bypass and its module: re-measure it against the plain path
(the decision's method) and keep or remove it then, rather than finding out from a wrong
row or a 500. The behaviour of each bypass is tested against the plain path elsewhere
(tests/fastpaths/, tests/worker/test_claim_all.py, tests/acme/test_wire.py,
tests/api/test_asgi_http.py); this file checks only that the ground they stand on is there.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import django.db.models.query as django_query
import pytest
import requests
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.db.models import Model
from django.db.models.base import ModelState
from josepy.jwa import RS256, JWASignature
from josepy.jwk import JWKRSA
from josepy.util import ComparableKey
from rest_framework import serializers

from issuance.models import Certificate


def parameters(func: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(func).parameters)


@dataclass(frozen=True)
class PrivateUse:
    bypass: str
    module: str
    uses: str
    holds: Callable[[], bool]


def _comparable_key_wraps() -> bool:
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    wrapped = JWKRSA(key=key).key
    return isinstance(wrapped, ComparableKey) and getattr(wrapped, "_wrapped", None) is key


def _compiler_after_as_sql() -> bool:
    compiler = Certificate.objects.select_related("issuer").query.get_compiler("default")
    compiler.as_sql()
    if not all(hasattr(compiler, name) for name in ("select", "klass_info", "col_count")):
        return False
    expressions = [s[0] for s in compiler.select[0 : compiler.col_count]]
    converters = compiler.get_converters(expressions)
    return parameters(compiler.apply_converters) == ["rows", "converters"] and isinstance(
        converters, dict
    )


def _response_content_is_the_body() -> bool:
    response = requests.Response()
    response._content = b"body"
    return response.content == b"body" and response.text == "body"


def _readable_fields_is_a_property() -> bool:
    attribute = inspect.getattr_static(serializers.Serializer, "_readable_fields", None)
    return isinstance(attribute, property)


USES = [
    PrivateUse(
        "compiled row loads",
        "issuance/fastpaths/compiled_query.py",
        "django.db.models.query.get_related_populators(klass_info, select, db)",
        lambda: parameters(django_query.get_related_populators) == ["klass_info", "select", "db"],  # type: ignore[attr-defined]
    ),
    PrivateUse(
        "compiled row loads",
        "issuance/fastpaths/compiled_query.py",
        "a query's compiler: as_sql(), then .select, .klass_info, .col_count, "
        "get_converters(expressions), apply_converters(rows, converters)",
        _compiler_after_as_sql,
    ),
    PrivateUse(
        "new rows with one precompiled INSERT",
        "issuance/fastpaths/model_save.py",
        "Model._prepare_related_fields_for_save(operation_name=...)",
        lambda: "operation_name" in parameters(Model._prepare_related_fields_for_save),  # type: ignore[attr-defined]
    ),
    PrivateUse(
        "new rows with one precompiled INSERT",
        "issuance/fastpaths/model_save.py",
        "Model._save_table(raw, cls, force_insert, force_update, using, update_fields)",
        lambda: (
            parameters(Model._save_table)  # type: ignore[attr-defined]
            == ["self", "raw", "cls", "force_insert", "force_update", "using", "update_fields"]
        ),
    ),
    PrivateUse(
        "precompiled status UPDATEs and INSERTs, multi-row timeline INSERT",
        "issuance/fastpaths/model_save.py, issuance/fastpaths/event_insert.py",
        "Model._state, a ModelState whose adding and db say whether and where a row is stored",
        lambda: (
            isinstance(Certificate()._state, ModelState)
            and Certificate()._state.adding is True
            and Certificate()._state.db is None
        ),
    ),
    PrivateUse(
        "serializer fields built once",
        "issuance/fastpaths/prebuilt_fields.py",
        "rest_framework Serializer._readable_fields (a property)",
        _readable_fields_is_a_property,
    ),
    PrivateUse(
        "JWS signer without josepy's generic machinery",
        "issuance/acme/protocol/jws.py",
        "josepy's ComparableKey._wrapped and JWASignature.sign(key, msg)",
        lambda: (
            _comparable_key_wraps()
            and isinstance(RS256, JWASignature)
            and parameters(RS256.sign) == ["key", "msg"]
        ),
    ),
    PrivateUse(
        "urllib3 pools in place of requests.Session",
        "issuance/acme/protocol/transport.py",
        "requests.Response._content read back by .content and .text",
        _response_content_is_the_body,
    ),
    PrivateUse(
        "plain HTTP under ASGI on long-lived threads",
        "console/asgi_http.py",
        "BaseHandler.load_middleware(is_async)",
        lambda: parameters(BaseHandler.load_middleware) == ["self", "is_async"],
    ),
    PrivateUse(
        "plain HTTP under ASGI on long-lived threads",
        "console/asgi_http.py",
        "BaseHandler.get_response(request)",
        lambda: parameters(BaseHandler.get_response) == ["self", "request"],
    ),
    PrivateUse(
        "plain HTTP under ASGI on long-lived threads",
        "console/asgi_http.py",
        "ASGIHandler.read_body(receive)",
        lambda: parameters(ASGIHandler.read_body) == ["self", "receive"],
    ),
    PrivateUse(
        "plain HTTP under ASGI on long-lived threads",
        "console/asgi_http.py",
        "ASGIHandler.create_request(scope, body_file)",
        lambda: parameters(ASGIHandler.create_request) == ["self", "scope", "body_file"],
    ),
    PrivateUse(
        "plain HTTP under ASGI on long-lived threads",
        "console/asgi_http.py",
        "ASGIHandler.send_response(response, send)",
        lambda: parameters(ASGIHandler.send_response) == ["self", "response", "send"],
    ),
    PrivateUse(
        "plain HTTP under ASGI on long-lived threads",
        "console/asgi_http.py",
        "ASGIHandler.chunk_bytes(data) yielding (chunk, last) and chunk_size",
        lambda: (
            list(ASGIHandler.chunk_bytes(b"ab")) == [(b"ab", True)]
            and isinstance(ASGIHandler.chunk_size, int)
        ),
    ),
]


@pytest.mark.parametrize("use", USES, ids=[f"{u.bypass}: {u.uses}" for u in USES])
def test_the_private_api_a_bypass_relies_on_is_unchanged(use: PrivateUse) -> None:
    assert use.holds(), (
        f"The bypass '{use.bypass}' ({use.module}) relies on {use.uses}, which has changed. "
        "Re-measure it against the plain path (docs/decisions/0004-bypasses.md) and fix or "
        "remove it."
    )
