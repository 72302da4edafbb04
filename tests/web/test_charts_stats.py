"""Dashboard charts (inline SVG) and /api/v1/stats/ on a known dataset with fixed dates."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from console.web.charts import expiry_chart, renewals_chart, y_tick_values
from issuance.models import Certificate, Event, Issuer
from issuance.observability.stats import ExpiryBucket, RenewalDay, RenewalStats, Stats
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db

NOW = datetime(2030, 3, 10, 9, 0, tzinfo=UTC)
TODAY = datetime(2030, 3, 10, tzinfo=UTC)

# name, issuer, renewal day (from today; None: none), days to expiry (None: not issued)
CERTS: list[tuple[str, str, int | None, int | None]] = [
    ("c1", "alpha", 0, 3),
    ("c2", "alpha", 0, 3),
    ("c3", "alpha", 3, 10),
    ("c4", "beta", 3, 65),
    ("c5", "beta", 3, 70),
    ("c6", "beta", 89, 80),
    ("c7", "beta", 90, 120),  # renewal past the 90-day window
    ("c8", "alpha", -2, -1),  # overdue, expired
    ("c9", "alpha", None, None),  # not issued yet
]
# kind, reason, day (from today): only Certificate Issued / Failed / Denied in 14 days count.
EVENTS = [
    ("Certificate", "Issued", 0),
    ("Certificate", "Issued", 0),
    ("Certificate", "Failed", 0),
    ("Certificate", "Issued", -3),
    ("Certificate", "Denied", -13),
    ("Certificate", "Failed", -14),  # before the window
    ("CertificateRequest", "Issued", 0),  # a request's, not an issuance's
    ("Certificate", "Issuing", 0),
]


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> datetime:
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    return NOW


@pytest.fixture
def dataset(frozen: datetime) -> None:
    issuers = {name: make_selfsigned_issuer(name) for name in ("alpha", "beta")}
    for name, issuer, renew, expiry in CERTS:
        cert = make_certificate(name, issuers[issuer])
        if renew is not None:
            cert.renewal_time = TODAY + timedelta(days=renew, hours=12)
        if expiry is not None:
            cert.not_after = NOW + timedelta(days=expiry, hours=1)
        cert.save()
    for i, (kind, reason, day) in enumerate(EVENTS):
        Event.objects.create(
            kind=kind,
            name=f"e{i}",
            reason=reason,
            created_at=TODAY + timedelta(days=day, hours=10),
        )


def _figure(html: str, key: str) -> str:
    start = html.index(f'id="chart-{key}"')
    return html[start : html.index("</figure>", start)]


def _bars(figure: str) -> list[str]:
    return re.findall(r'<rect class="chart-bar (chart-[a-z]\d)"', figure)


def test_dashboard_draws_three_charts(
    dataset: None, client_for: Callable[[str | None], Client]
) -> None:
    html = client_for("viewer").get("/").content.decode()
    renewals = _figure(html, "renewals")
    # day 0: alpha; day 3: alpha + beta stacked; day 89: beta; drawn twice (wide, and
    # compact for phones).
    assert sorted(_bars(renewals)) == ["chart-s0"] * 4 + ["chart-s1"] * 4
    assert 'class="chart-svg chart-svg-compact" viewBox="0 0 440 180"' in renewals
    assert "<title" in renewals and "<desc" in renewals and 'role="img"' in renewals
    assert "6 renewals in the next 90 days" in renewals
    assert "busiest day is 2030-03-13 with 3" in renewals and "1 overdue" in renewals
    assert (
        "<details" in renewals and '<th scope="row" data-label="Date">2030-06-07</th>' in renewals
    )

    expiry = _figure(html, "expiry")
    # expired, <7, 7-30, 60-90, >90 (30-60 is empty: no bar).
    # (drawn twice: wide, and compact with short axis labels for phones)
    assert _bars(expiry) == ["chart-e0", "chart-e1", "chart-e2", "chart-e4", "chart-e5"] * 2
    assert ">30–60d</text>" in expiry
    assert "8 issued certificates; 3 expired or expiring within 7 days" in expiry
    assert "1 not issued yet" in expiry

    issuance = _figure(html, "issuance")
    assert sorted(_bars(issuance)) == ["chart-o0", "chart-o0", "chart-o1", "chart-o1"]
    assert "3 issued and 2 failed in the last 14 days." in issuance


def test_stacked_bar_heights_follow_the_counts(
    dataset: None, client_for: Callable[[str | None], Client]
) -> None:
    html = client_for("viewer").get("/partials/dashboard/charts/").content.decode()
    heights = [
        float(h) for h in re.findall(r'class="chart-bar chart-s\d"[^>]* height="([\d.]+)"', html)
    ]
    # The axis tops at 5 for a busiest day of 3, over a plot 150 units high: 30 a renewal
    # (day 0: 2 alpha; day 3: 1 alpha + 2 beta; day 89: 1 beta).
    # (each twice: the renewals chart's wide and compact drawings).
    assert sorted(heights) == pytest.approx([30.0] * 4 + [60.0] * 4)
    assert re.search(r'<text [^>]*text-anchor="end"[^>]*>5</text>', html)  # the axis top


def test_stats_api_numbers(dataset: None, role_users: dict[str, User]) -> None:
    client = APIClient()
    client.force_authenticate(role_users["viewer"])
    data: dict[str, Any] = client.get("/api/v1/stats/").json()
    renewals = data["renewals"]
    assert renewals["start"] == "2030-03-10" and renewals["days"] == 90
    assert renewals["issuers"] == ["alpha", "beta"] and renewals["overdue"] == 1
    busy = {d["date"]: d for d in renewals["perDay"] if d["total"]}
    assert busy == {
        "2030-03-10": {
            "date": "2030-03-10",
            "total": 2,
            "byIssuer": [{"issuer": "alpha", "count": 2}],
        },
        "2030-03-13": {
            "date": "2030-03-13",
            "total": 3,
            "byIssuer": [{"issuer": "alpha", "count": 1}, {"issuer": "beta", "count": 2}],
        },
        "2030-06-07": {
            "date": "2030-06-07",
            "total": 1,
            "byIssuer": [{"issuer": "beta", "count": 1}],
        },
    }
    assert len(renewals["perDay"]) == 90
    buckets = {b["bucket"]: b["count"] for b in data["expiry"]["buckets"]}
    assert buckets == {"expired": 1, "lt7": 2, "d7to30": 1, "d30to60": 0, "d60to90": 3, "gt90": 1}
    assert data["expiry"]["withoutCertificate"] == 1
    issuance = {d["date"]: (d["issued"], d["failed"]) for d in data["issuance"]}
    assert len(issuance) == 14 and min(issuance) == "2030-02-25"
    assert {d: v for d, v in issuance.items() if v != (0, 0)} == {
        "2030-02-25": (0, 1),
        "2030-03-07": (1, 0),
        "2030-03-10": (2, 1),
    }


def test_stats_needs_a_role(role_users: dict[str, User]) -> None:
    assert APIClient().get("/api/v1/stats/").status_code == 401
    nobody = APIClient()
    nobody.force_authenticate(role_users["nobody"])
    assert nobody.get("/api/v1/stats/").status_code == 403


def test_many_issuers_are_summed_as_other(frozen: datetime, role_users: dict[str, User]) -> None:
    for i in range(8):
        issuer = make_selfsigned_issuer(f"iss{i}")
        for j in range(i + 1):
            cert = make_certificate(f"c{i}-{j}", issuer)
            cert.renewal_time = TODAY + timedelta(days=1, hours=1)
            cert.save()
    client = APIClient()
    client.force_authenticate(role_users["viewer"])
    renewals = client.get("/api/v1/stats/").json()["renewals"]
    assert renewals["issuers"] == ["iss7", "iss6", "iss5", "iss4", "iss3", "other issuers"]
    day = renewals["perDay"][1]
    assert day["total"] == 36 and day["byIssuer"][-1] == {"issuer": "other issuers", "count": 6}


def _make(n: int, issuer: Issuer) -> None:
    Certificate.objects.bulk_create(
        Certificate(
            name=f"bulk-{issuer.name}-{i}",
            issuer=issuer,
            spec={"dnsNames": [f"b{i}.example.test"], "issuerRef": {"name": issuer.name}},
            secret_name=f"bulk-{i}",
            renewal_time=NOW + timedelta(days=i % 95),
            not_after=NOW + timedelta(days=i % 120 - 5),
        )
        for i in range(n)
    )
    Event.objects.bulk_create(
        Event(kind="Certificate", name=f"bulk-{i}", reason="Issued", created_at=NOW)
        for i in range(n)
    )


def test_query_counts_do_not_grow(
    frozen: datetime,
    role_users: dict[str, User],
    client_for: Callable[[str | None], Client],
) -> None:
    api = APIClient()
    api.force_authenticate(role_users["viewer"])
    page = client_for("viewer")

    def counts() -> tuple[int, int]:
        with CaptureQueriesContext(connection) as a:
            assert api.get("/api/v1/stats/").status_code == 200
        with CaptureQueriesContext(connection) as b:
            assert page.get("/partials/dashboard/charts/").status_code == 200
        return len(a.captured_queries), len(b.captured_queries)

    _make(10, make_selfsigned_issuer("ten"))
    counts()  # warm: the forced user's roles are cached on it after the first call
    few = counts()
    _make(100, make_selfsigned_issuer("hundred"))
    assert counts() == few
    assert few[0] == 3  # the three grouped queries


@pytest.mark.parametrize(
    ("top", "ticks"),
    [
        (1, [0, 1]),
        (2, [0, 1, 2]),
        (5, [0, 1, 2, 3, 4, 5]),
        (10, [0, 5, 10]),
        (20, [0, 10, 20]),
        (50, [0, 10, 20, 30, 40, 50]),
        (100, [0, 50, 100]),
        (500, [0, 100, 200, 300, 400, 500]),
    ],
)
def test_y_ticks_are_evenly_spaced_whole_numbers(top: int, ticks: list[int]) -> None:
    assert y_tick_values(top) == ticks


def test_y_axis_of_a_busiest_day_of_3_counts_0_to_5_by_ones(
    dataset: None, client_for: Callable[[str | None], Client]
) -> None:
    html = client_for("viewer").get("/partials/dashboard/charts/").content.decode()
    renewals = _figure(html, "renewals")
    full = renewals[: renewals.index("chart-svg-compact")]
    labels = re.findall(r'<text [^>]*text-anchor="end"[^>]*>(\d+)</text>', full)
    assert labels == ["0", "1", "2", "3", "4", "5"]  # not 0, 2, 5


def test_chart_summaries_are_pluralised() -> None:
    day = TODAY.date()
    stats = Stats(
        generated_at=NOW,
        renewals=RenewalStats(
            day,
            ("alpha",),
            tuple(RenewalDay(day + timedelta(d), (int(d == 0),)) for d in range(90)),
            0,
        ),
        expiry=(ExpiryBucket("gt90", "> 90 days", 1),),
        without_certificate=0,
        issuance=(),
    )
    renewals = renewals_chart(stats).summary
    expiry = expiry_chart(stats).summary
    assert renewals.startswith("1 renewal in the next 90 days"), renewals
    assert expiry.startswith("1 issued certificate;"), expiry
