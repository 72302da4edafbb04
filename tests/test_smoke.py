from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from issuance.models import CertificateRequest, ImmutableSpecError
from issuance.timing.backoff import exponential
from tests.factories import make_selfsigned_issuer


@pytest.mark.django_db
def test_request_spec_is_immutable_in_model_layer() -> None:
    issuer = make_selfsigned_issuer()
    cr = CertificateRequest.objects.create(name="r1", issuer=issuer, spec={"request": "x"})
    cr.spec = {"request": "y"}
    with pytest.raises(ImmutableSpecError):
        cr.save()
    with pytest.raises(ImmutableSpecError):
        CertificateRequest.objects.filter(pk=cr.pk).update(spec={"request": "z"})
    cr.refresh_from_db()
    assert cr.spec == {"request": "x"}


@given(st.integers(min_value=-5, max_value=10**6))
def test_exponential_never_exceeds_cap(attempts: int) -> None:
    result = exponential(attempts, timedelta(hours=1), timedelta(hours=32))
    assert timedelta(hours=1) <= result <= timedelta(hours=32)
