"""The compiled HTTP-01 lookup answers exactly what its QuerySet answers."""

from __future__ import annotations

import pytest

from issuance.fastpaths.http01_lookup import presented_key
from issuance.models import Challenge, ChallengeType
from tests.factories import make_acme_issuer, make_challenge, make_order

pytestmark = pytest.mark.django_db


def _orm(token: str) -> str | None:
    spec = (
        Challenge.objects.filter(
            token=token, type=ChallengeType.HTTP01, presented=True, finished=False
        )
        .values_list("spec", flat=True)
        .first()
    )
    return str(spec["key"]) if spec and spec.get("key") else None


def test_presented_key_matches_the_queryset_for_every_kind_of_row() -> None:
    issuer = make_acme_issuer()
    order = make_order(issuer)
    make_challenge(order, "a.example.test", token="shown", key="shown.k", presented=True)
    make_challenge(order, "b.example.test", token="hidden", key="hidden.k")
    make_challenge(order, "c.example.test", token="done", presented=True, finished=True)
    make_challenge(order, "d.example.test", "dns-01", token="dns", presented=True)
    tokens = ["shown", "hidden", "done", "dns", "absent", "a'; DROP TABLE x; --"]
    assert [presented_key(t) for t in tokens] == [_orm(t) for t in tokens]
    assert presented_key("shown") == "shown.k"
    assert [presented_key(t) for t in tokens[1:]] == [None] * 5
