"""CompiledQuery: a QuerySet compiled once with stand-ins, run with real values."""

from __future__ import annotations

import pytest
from django.db.models import Q, QuerySet
from pytest_django import DjangoAssertNumQueries

from issuance.fastpaths.compiled_query import CompiledQuery, compiled
from issuance.models import Certificate, Issuer
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db

STAND_IN = "\x00name"


def by_name(name: str) -> QuerySet[Certificate]:
    return Certificate.objects.filter(name=name).select_related("issuer").order_by()


def test_runs_with_each_value_and_fills_related_rows(
    django_assert_num_queries: DjangoAssertNumQueries,
) -> None:
    issuer = make_selfsigned_issuer("one")
    make_certificate("alpha", issuer)
    make_certificate("beta", make_selfsigned_issuer("two"))
    query = compiled("test.by_name", by_name, STAND_IN)
    assert compiled("test.by_name", by_name, STAND_IN) is query  # compiled once per thread
    [alpha] = query.fetch("alpha")
    [beta] = query.fetch("beta")
    assert isinstance(alpha, Certificate) and alpha.name == "alpha"
    assert isinstance(beta, Certificate) and beta.name == "beta"
    with django_assert_num_queries(0):  # the related row came with the query
        assert isinstance(beta.issuer, Issuer) and beta.issuer.name == "two"
    assert query.fetch("missing") == []


def test_a_stand_in_that_is_not_a_parameter_is_refused() -> None:
    # An out-of-range integer lookup is compiled away by Django: the stand-in must say so.
    queryset = Certificate.objects.filter(Q(name="x") | Q(failed_issuance_attempts=-(2**62)))
    with pytest.raises(ValueError, match="not a parameter"):
        CompiledQuery(queryset, [-(2**62)])
