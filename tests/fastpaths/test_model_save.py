"""Resource.save(update_fields=…) through the precompiled UPDATE: same result as Django's."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, connection
from django.db.models import F, Value
from django.db.models.signals import post_save, pre_save
from django.test.utils import CaptureQueriesContext

from issuance.fastpaths.model_save import update_where
from issuance.models import Certificate, CertificateRequest
from issuance.models.base import ImmutableSpecError
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db


def test_saves_only_the_named_fields_with_auto_now_and_one_statement() -> None:
    cert = make_certificate("fast", make_selfsigned_issuer())
    before = Certificate.objects.get(pk=cert.pk)
    cert.state = "Issuing"
    cert.failed_issuance_attempts = 3
    cert.conditions = [{"type": "Ready", "status": "False", "reason": "Why <b>"}]
    with CaptureQueriesContext(connection) as ctx:
        cert.save(update_fields=["state", "conditions", "updated_at"])
    assert len(ctx.captured_queries) == 1
    row = Certificate.objects.get(pk=cert.pk)
    assert row.state == "Issuing"
    assert row.conditions == cert.conditions  # JSON round trip
    assert row.failed_issuance_attempts == before.failed_issuance_attempts  # not named
    assert row.updated_at > before.updated_at  # auto_now applied


def test_sends_post_save_with_the_update_fields() -> None:
    cert = make_certificate("signal", make_selfsigned_issuer())
    seen: list[frozenset[str] | None] = []

    def receiver(
        sender: type,
        instance: Certificate,
        update_fields: frozenset[str] | None = None,
        **kwargs: object,
    ) -> None:
        seen.append(update_fields)

    post_save.connect(receiver, sender=Certificate)
    try:
        cert.save(update_fields=["state"])
    finally:
        post_save.disconnect(receiver, sender=Certificate)
    assert seen == [frozenset({"state"})]


def test_a_deleted_row_is_an_error_and_bad_names_are_djangos_error() -> None:
    cert = make_certificate("gone", make_selfsigned_issuer())
    Certificate.objects.filter(pk=cert.pk).delete()
    with pytest.raises(DatabaseError, match="did not affect any rows"):
        cert.save(update_fields=["state"])
    other = make_certificate("names", make_selfsigned_issuer("other"))
    with pytest.raises(ValueError, match="do not exist"):
        other.save(update_fields=["no_such_field"])


def test_expressions_and_immutable_specs_keep_djangos_behaviour() -> None:
    cert = make_certificate("expr", make_selfsigned_issuer())
    Certificate.objects.filter(pk=cert.pk).update(failed_issuance_attempts=1)
    cert.failed_issuance_attempts = F("failed_issuance_attempts") + 2
    cert.save(update_fields=["failed_issuance_attempts"])
    cert.refresh_from_db()
    assert cert.failed_issuance_attempts == 3
    request = CertificateRequest.objects.create(
        name="req", issuer=cert.issuer, spec={"request": "x"}, revision=1
    )
    request = CertificateRequest.objects.get(pk=request.pk)
    request.spec = {"request": "changed"}
    with pytest.raises(ImmutableSpecError):
        request.save(update_fields=["spec"])


def test_update_where_changes_the_row_only_while_it_matches() -> None:
    cert = make_certificate("cond", make_selfsigned_issuer())
    cert.state = "Issuing"
    with CaptureQueriesContext(connection) as ctx:
        assert update_where(cert, ["state"], "default", failed_issuance_attempts=None) == 0
    assert len(ctx.captured_queries) == 1  # NULL never equals: nothing changed
    Certificate.objects.filter(pk=cert.pk).update(failed_issuance_attempts=2)
    assert update_where(cert, ["state"], "default", failed_issuance_attempts=3) == 0
    assert Certificate.objects.get(pk=cert.pk).state != "Issuing"
    assert update_where(cert, ["state"], "default", failed_issuance_attempts=2) == 1
    assert Certificate.objects.get(pk=cert.pk).state == "Issuing"
    assert update_where(cert, ["no_such_field"], "default") is None  # caller falls back


@pytest.mark.parametrize("expression_from", ["caller", "pre_save receiver"])
def test_a_new_row_sends_pre_save_once_when_a_value_is_an_expression(
    expression_from: str,
) -> None:
    """insert_save hands a row with an expression to the ORM; pre_save is still sent once
    (it was sent twice: by insert_save and again by the Model.save it fell back to)."""
    issuer = make_selfsigned_issuer()
    seen: list[str] = []

    def on_pre(instance: Certificate, **kwargs: Any) -> None:
        seen.append("pre_save")
        if expression_from == "pre_save receiver":
            instance.failed_issuance_attempts = Value(2) + 3

    def on_post(**kwargs: Any) -> None:
        seen.append("post_save")

    pre_save.connect(on_pre, sender=Certificate)
    post_save.connect(on_post, sender=Certificate)
    try:
        spec = {"secretName": "expr-tls", "dnsNames": ["expr.example.test"]}
        cert = Certificate(name="expr", issuer=issuer, spec=spec, secret_name="expr-tls")
        if expression_from == "caller":
            cert.failed_issuance_attempts = Value(2) + 3
        cert.save()
    finally:
        pre_save.disconnect(on_pre, sender=Certificate)
        post_save.disconnect(on_post, sender=Certificate)
    assert seen == ["pre_save", "post_save"]
    assert cert.pk is not None and not cert._state.adding
    assert Certificate.objects.get(pk=cert.pk).failed_issuance_attempts == 5
