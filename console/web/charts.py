"""The dashboard's charts as geometry for inline SVG (templates draw it; no JS, no library).

Each chart is a list of bars (rectangles with a series class whose colour is a CSS variable,
so dark mode and the palette live in console.css), axis ticks, a one-sentence summary and the
rows of its data-table fallback. The numbers come from issuance/observability/stats.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import ngettext

from issuance.observability.stats import Stats

# viewBox widths: the renewals chart spans the dashboard, the other two share a row; about
# as wide as they are drawn, so the 11px labels stay readable.
WIDE = 1100
NARROW = 440
HEIGHT = 180
LEFT = 36  # room for the y-axis labels
BOTTOM = 22  # room for the x-axis labels
TOP = 8


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    series: int  # index into the chart's legend: the CSS class chart-s<series>
    label: str  # the <title> tooltip


@dataclass(frozen=True)
class Tick:
    pos: float
    label: str


@dataclass
class Chart:
    key: str
    title: str
    summary: str
    legend: list[str]
    columns: list[str]  # the fallback table's header
    rows: list[list[Any]]
    bars: list[Bar] = field(default_factory=list)
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    # The CSS class prefix of the bars: s (issuers), e (expiry buckets), o (outcomes).
    palette: str = "s"
    width: int = WIDE
    height: int = HEIGHT
    left: int = LEFT
    plot_bottom: int = HEIGHT - BOTTOM
    # A narrower drawing of the same data for phones (console.css shows one of the two): the
    # wide chart scaled to a 390 px screen draws its 11-unit labels about 4 px tall.
    compact: Chart | None = None


def _nice_max(value: int) -> int:
    """The y axis's top: 1, 2, 5 × 10^n at or above the largest value."""
    top = 1
    while True:
        for step in (1, 2, 5):
            if top * step >= value:
                return top * step
        top *= 10


def _y_step(top: int) -> int:
    """Evenly spaced whole-number ticks up to `top` (1, 2 or 5 × 10^n): 5 → 0, 1, 2, 3, 4,
    5; 10 → 0, 5, 10; 20 → 0, 10, 20; 50 → 0, 10, ..., 50 (never 0, 2, 5)."""
    if top <= 2:
        return 1
    return top // 5 if str(top)[0] == "5" else top // 2


def y_tick_values(top: int) -> list[int]:
    return list(range(0, top + 1, _y_step(top)))


def _y_ticks(top: int) -> list[Tick]:
    plot = HEIGHT - BOTTOM - TOP
    return [Tick(round(HEIGHT - BOTTOM - plot * v / top, 2), str(v)) for v in y_tick_values(top)]


def _stacked(
    columns: list[list[int]], labels: list[str], legend: list[str], chart_width: int
) -> tuple[list[Bar], list[Tick]]:
    top = _nice_max(max((sum(c) for c in columns), default=0))
    plot = HEIGHT - BOTTOM - TOP
    slot = (chart_width - LEFT) / max(len(columns), 1)
    width = max(slot * 0.8, 1.0)
    bars: list[Bar] = []
    for i, counts in enumerate(columns):
        base = float(HEIGHT - BOTTOM)
        for series, n in enumerate(counts):
            if not n:
                continue
            h = plot * n / top
            base -= h
            bars.append(
                Bar(
                    round(LEFT + i * slot + (slot - width) / 2, 2),
                    round(base, 2),
                    round(width, 2),
                    round(h, 2),
                    series,
                    f"{labels[i]}: {n} {legend[series]}",
                )
            )
    return bars, _y_ticks(top)


def _x_ticks(labels: list[str], every: int, chart_width: int) -> list[Tick]:
    slot = (chart_width - LEFT) / max(len(labels), 1)
    return [Tick(LEFT + i * slot + slot / 2, labels[i]) for i in range(0, len(labels), every)]


def renewals_chart(data: Stats) -> Chart:
    r = data.renewals
    labels = [d.day.strftime("%b %d") for d in r.days]
    legend = list(r.series) or ["renewals"]
    columns = [list(d.counts) or [0] for d in r.days]
    bars, y_ticks = _stacked(columns, labels, legend, WIDE)
    total = sum(d.total for d in r.days)
    peak = max(r.days, key=lambda d: d.total, default=None)
    summary = ngettext(
        "%(n)d renewal in the next %(days)d days",
        "%(n)d renewals in the next %(days)d days",
        total,
    ) % {"n": total, "days": len(r.days)}
    if peak is not None and peak.total:
        summary += f"; the busiest day is {peak.day.isoformat()} with {peak.total}"
    if r.overdue:
        summary += f"; {r.overdue} overdue"
    rows = [[d.day.isoformat(), *d.counts, d.total] for d in r.days if d.total]
    title = f"Renewals per day, next {len(r.days)} days, by issuer"
    compact_bars, _ = _stacked(columns, labels, legend, NARROW)
    compact = Chart(
        "renewals-compact",
        title,
        summary + ".",
        legend,
        [],
        [],
        compact_bars,
        _x_ticks(labels, 30, NARROW),
        y_ticks,
        width=NARROW,
    )
    return Chart(
        "renewals",
        title,
        summary + ".",
        legend,
        ["Date", *r.series, "Total"],
        rows,
        bars,
        _x_ticks(labels, 15, WIDE),
        y_ticks,
        compact=compact,
    )


# The expiry buckets' axis labels on a phone (the legend and the table keep the long ones).
SHORT_EXPIRY = {
    "lt7": "<7d",
    "d7to30": "7–30d",
    "d30to60": "30–60d",
    "d60to90": "60–90d",
    "gt90": ">90d",
}


def expiry_chart(data: Stats) -> Chart:
    labels = [b.label for b in data.expiry]
    # One series per bucket: expired and soon-expiring stand out in their own colours.
    legend = labels
    columns = [
        [b.count if j == i else 0 for j in range(len(labels))] for i, b in enumerate(data.expiry)
    ]
    bars, y_ticks = _stacked(columns, labels, ["certificates"] * len(labels), NARROW)
    total = sum(b.count for b in data.expiry)
    soon = sum(b.count for b in data.expiry if b.key in ("expired", "lt7"))
    summary = (
        ngettext("%(n)d issued certificate", "%(n)d issued certificates", total) % {"n": total}
        + f"; {soon} expired or expiring within 7 days"
    )
    if data.without_certificate:
        summary += f"; {data.without_certificate} not issued yet"
    return Chart(
        "expiry",
        "Certificates by days to expiry",
        summary + ".",
        legend,
        ["Days to expiry", "Certificates"],
        [[b.label, b.count] for b in data.expiry],
        bars,
        _x_ticks(labels, 1, NARROW),
        y_ticks,
        width=NARROW,
        palette="e",
        compact=Chart(
            "expiry-compact",
            "Certificates by days to expiry",
            summary + ".",
            legend,
            [],
            [],
            bars,
            # Six labels of up to ten characters overlap at a phone's larger axis labels.
            _x_ticks([SHORT_EXPIRY.get(b.key, b.label) for b in data.expiry], 1, NARROW),
            y_ticks,
            width=NARROW,
            palette="e",
        ),
    )


def issuance_chart(data: Stats) -> Chart:
    labels = [d.day.strftime("%b %d") for d in data.issuance]
    legend = ["issued", "failed"]
    columns = [[d.issued, d.failed] for d in data.issuance]
    bars, y_ticks = _stacked(columns, labels, legend, NARROW)
    issued = sum(d.issued for d in data.issuance)
    failed = sum(d.failed for d in data.issuance)
    return Chart(
        "issuance",
        f"Issuance outcomes per day, last {len(data.issuance)} days",
        f"{issued} issued and {failed} failed in the last {len(data.issuance)} days.",
        legend,
        ["Date", "Issued", "Failed"],
        [[d.day.isoformat(), d.issued, d.failed] for d in data.issuance],
        bars,
        _x_ticks(labels, 3, NARROW),
        y_ticks,
        width=NARROW,
        palette="o",
    )


def charts(data: Stats) -> list[Chart]:
    return [renewals_chart(data), expiry_chart(data), issuance_chart(data)]
