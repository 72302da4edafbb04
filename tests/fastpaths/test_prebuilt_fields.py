"""Serializers with fields built once per class give DRF's own output, object after object."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import serializers

from issuance.api.certificates import CertificateSerializer
from issuance.fastpaths.prebuilt_fields import PrebuiltFieldsMixin
from issuance.models import Certificate
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db


def _drf_own(cls: type[serializers.Serializer[Any]]) -> type[serializers.Serializer[Any]]:
    """The same serializer without the mixin (DRF copies its fields per instance)."""
    bases = tuple(b for b in cls.__bases__ if b is not PrebuiltFieldsMixin)
    plain: type[serializers.Serializer[Any]] = type(f"Plain{cls.__name__}", bases, {})
    for name, field in cls._declared_fields.items():
        plain._declared_fields[name] = field
    return plain


def test_output_equals_drf_for_different_objects_in_turn() -> None:
    issuer = make_selfsigned_issuer()
    first = make_certificate("one", issuer)
    second = make_certificate("two", issuer, dnsNames=["two.example.test"])
    Certificate.objects.filter(pk=second.pk).update(revision=3, observed_generation=2)
    second.refresh_from_db()
    plain = _drf_own(CertificateSerializer)
    for cert in (first, second, first):
        assert CertificateSerializer(cert).data == plain(cert).data
    assert CertificateSerializer(second).data["status"]["revision"] == 3
    assert CertificateSerializer(first).data["spec"]["dnsNames"] != ["two.example.test"]
