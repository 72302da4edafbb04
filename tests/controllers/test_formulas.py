"""Renewal time and issuance backoff formulas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from hypothesis import given
from hypothesis import strategies as st

from issuance.timing import backoff, renewal

T0 = datetime(2026, 1, 1, tzinfo=UTC)
H = timedelta(hours=1)


class TestRenewal:
    def test_default_is_one_third_of_lifetime(self) -> None:
        nb, na = T0, T0 + 90 * 24 * H
        assert renewal.renew_before(nb, na) == 30 * 24 * H

    def test_renew_before_used_when_below_lifetime(self) -> None:
        nb, na = T0, T0 + 90 * 24 * H
        assert renewal.renew_before(nb, na, "360h") == 360 * H

    @pytest.mark.parametrize("spec", ["2160h", "3000h"])
    def test_renew_before_not_below_lifetime_falls_back(self, spec: str) -> None:
        nb, na = T0, T0 + 2160 * H
        assert renewal.renew_before(nb, na, spec) == 720 * H

    def test_renew_before_falls_back_to_percentage(self) -> None:
        nb, na = T0, T0 + 100 * H
        assert renewal.renew_before(nb, na, "200h", 25) == 25 * H

    def test_percentage(self) -> None:
        nb, na = T0, T0 + 100 * H
        assert renewal.renew_before(nb, na, None, 10) == 10 * H

    @pytest.mark.parametrize("pct", [0, 100, 150, -5])
    def test_out_of_range_percentage_ignored(self, pct: int) -> None:
        nb, na = T0, T0 + 90 * H
        assert renewal.renew_before(nb, na, None, pct) == 30 * H

    def test_ari_wins(self) -> None:
        ari = T0 + 10 * H
        assert renewal.renewal_time("x", T0, T0 + 90 * H, "1h", 50, ari_suggested=ari) == ari

    @given(
        name=st.text(min_size=1, max_size=40),
        hours=st.integers(min_value=1, max_value=24 * 3650),
    )
    def test_jitter_only_moves_earlier(self, name: str, hours: int) -> None:
        nb, na = T0, T0 + hours * H
        before = renewal.renew_before(nb, na)
        when = renewal.renewal_time(name, nb, na)
        assert when <= na - before
        assert when >= na - before - min(before * renewal.JITTER_FRACTION, renewal.JITTER_MAX)

    def test_jitter_is_deterministic_and_spreads(self) -> None:
        nb, na = T0, T0 + 2160 * H
        times = {renewal.renewal_time(f"cert-{i}", nb, na) for i in range(50)}
        assert renewal.renewal_time("cert-1", nb, na) == renewal.renewal_time("cert-1", nb, na)
        assert len(times) > 40


class TestBackoff:
    @pytest.mark.parametrize(
        ("attempts", "hours"),
        [(1, 1), (2, 2), (3, 4), (4, 8), (5, 16), (6, 32), (7, 32), (50, 32)],
    )
    def test_doubling_with_cap(self, attempts: int, hours: int) -> None:
        assert backoff.issuance_backoff(attempts) == hours * H

    def test_none_attempts_counts_as_one(self) -> None:
        assert backoff.issuance_backoff(None) == H
        assert backoff.next_retry_time(T0, None) == T0 + H

    def test_zero_attempts_counts_as_one(self) -> None:
        assert backoff.issuance_backoff(0) == H

    def test_no_failure_no_retry_time(self) -> None:
        assert backoff.next_retry_time(None, 3) is None

    @pytest.mark.parametrize("attempts", [10**6, 2**63, 10**100])
    def test_huge_attempts_do_not_overflow(self, attempts: int) -> None:
        assert backoff.issuance_backoff(attempts) == 32 * H

    @override_settings(BACKOFF_MIN=timedelta(minutes=5), BACKOFF_MAX=timedelta(minutes=30))
    def test_configurable_bounds(self) -> None:
        assert backoff.issuance_backoff(1) == timedelta(minutes=5)
        assert backoff.issuance_backoff(2) == timedelta(minutes=10)
        assert backoff.issuance_backoff(3) == timedelta(minutes=20)
        assert backoff.issuance_backoff(4) == timedelta(minutes=30)
        assert backoff.issuance_backoff(10**9) == timedelta(minutes=30)

    def test_worker_error_backoff(self) -> None:
        assert backoff.error_backoff(1) == timedelta(seconds=1)
        assert backoff.error_backoff(3) == timedelta(seconds=4)
        assert backoff.error_backoff(100) == timedelta(seconds=30)
        assert backoff.error_backoff(1, acme=True) == timedelta(seconds=5)
        assert backoff.error_backoff(100, acme=True) == timedelta(minutes=30)
