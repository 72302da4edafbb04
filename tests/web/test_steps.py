"""How the console words a challenge's step and a countdown."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from console.templatetags.console import countdown, relative_text
from console.web.dashboard import challenge_step
from issuance.models import Challenge


def _challenge(**fields: object) -> Challenge:
    base: dict[str, object] = {
        "processing": True,
        "presented": False,
        "finished": False,
        "state": "pending",
        "reason": "",
    }
    base.update(fields)
    return Challenge(**base)


@pytest.mark.parametrize(
    ("fields", "step", "detail"),
    [
        ({"processing": False, "state": ""}, "queued", ""),
        ({}, "scheduled", ""),
        (
            {"reason": "presenting failed: DNS update refused"},
            "scheduled",
            "presenting failed: DNS update refused",
        ),
        (
            {"presented": True, "reason": "presented; waiting for the self check"},
            "presented",
            "presented; waiting for the self check",
        ),
        (
            {"presented": True, "reason": "self check failed: wrong status code 404"},
            "self-check failing",
            "self check failed: wrong status code 404",
        ),
        (
            {"presented": True, "state": "processing", "reason": "self check passed; accepting"},
            "accepted",
            "self check passed; accepting",
        ),
        (
            {
                "presented": True,
                "conditions": [{"type": "Accepted", "status": "True"}],
                "reason": "accepted; waiting for the CA to validate",
            },
            "accepted",
            "accepted; waiting for the CA to validate",
        ),
        (
            {"processing": False, "finished": True, "state": "invalid", "reason": "403"},
            "invalid",
            "403",
        ),
    ],
)
def test_challenge_step(fields: dict[str, object], step: str, detail: str) -> None:
    result = challenge_step(_challenge(**fields))
    assert (result.step, result.detail) == (step, detail)


def test_relative_text_matches_live_js() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert relative_text(now + timedelta(minutes=59, seconds=58), now) == "in 59m 58s"
    assert relative_text(now - timedelta(seconds=5), now) == "5s ago"
    assert relative_text(now + timedelta(days=2, hours=3, minutes=4), now) == "in 2d 3h"
    assert relative_text(now + timedelta(hours=1, minutes=2, seconds=3), now) == "in 1h 2m"
    assert relative_text(now + timedelta(milliseconds=300), now) == "now"


def test_countdown_markup() -> None:
    when = datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC)
    html = str(countdown(when))
    assert html.startswith('<time data-countdown="2030-05-06T07:08:09Z"')
    assert 'title="2030-05-06 07:08:09 UTC"' in html
    assert str(countdown(None)) == '<span class="muted">—</span>'
