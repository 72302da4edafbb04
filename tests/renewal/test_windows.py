"""Renewal windows and `policy: Disabled` (cert-manager 1.21's spec.renewal), fixed clocks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from issuance.controllers.certificate_policy import compute_renewal_time
from issuance.models import Certificate, CertificateState, Secret
from issuance.operations import actions
from issuance.pki.x509 import cert_info
from issuance.specs import SpecError, validate_certificate_spec
from issuance.timing import cron
from issuance.timing.renewal import Window, first_in_windows, windows_of
from tests.controllers.helpers import step
from tests.factories import make_certificate, make_selfsigned_issuer
from tests.helpers import drain

EC = {"algorithm": "ECDSA", "size": 256}
BERLIN = ZoneInfo("Europe/Berlin")
H = timedelta(hours=1)


def _window(expression: str, zone: ZoneInfo = BERLIN, hours: float = 2) -> Window:
    return Window(cron.parse(expression), zone, timedelta(hours=hours))


class TestFirstInWindows:
    def test_inside_a_window_keeps_the_time(self) -> None:
        # Saturdays 22:00-02:00 Berlin; Saturday 2026-06-06 23:15 CEST is inside.
        saturday_night = _window("0 22 * * sat", hours=4)
        moment = datetime(2026, 6, 6, 21, 15, tzinfo=UTC)
        assert first_in_windows(moment, [saturday_night]) == moment

    def test_outside_moves_to_the_next_opening(self) -> None:
        saturday_night = _window("0 22 * * sat", hours=4)
        tuesday = datetime(2026, 6, 2, 9, 0, tzinfo=UTC)
        assert first_in_windows(tuesday, [saturday_night]) == datetime(
            2026, 6, 6, 20, 0, tzinfo=UTC
        )

    def test_window_end_is_exclusive(self) -> None:
        saturday_night = _window("0 22 * * sat", hours=4)
        closing = datetime(2026, 6, 7, 0, 0, tzinfo=UTC)  # 02:00 CEST, the end
        assert first_in_windows(closing, [saturday_night]) == datetime(
            2026, 6, 13, 20, 0, tzinfo=UTC
        )
        assert first_in_windows(closing - timedelta(seconds=1), [saturday_night]) == (
            closing - timedelta(seconds=1)
        )

    def test_earliest_of_several_windows(self) -> None:
        weekdays = _window("0 3 * * mon-fri", ZoneInfo("UTC"), 1)
        sunday = _window("0 12 * * sun", ZoneInfo("UTC"), 1)
        saturday = datetime(2026, 6, 6, 4, 0, tzinfo=UTC)
        assert first_in_windows(saturday, [weekdays, sunday]) == datetime(
            2026, 6, 7, 12, 0, tzinfo=UTC
        )

    def test_no_windows_and_never_opening(self) -> None:
        moment = datetime(2026, 6, 2, 9, 0, tzinfo=UTC)
        assert first_in_windows(moment, []) == moment
        assert first_in_windows(moment, [_window("0 0 30 2 *")]) is None

    def test_dst_spring_forward_window_in_the_skipped_hour(self) -> None:
        # 02:30 Berlin does not exist on 2026-03-29: that day's window opens at 03:30 CEST.
        nightly = _window("30 2 * * *", hours=1)
        evening = datetime(2026, 3, 28, 20, 0, tzinfo=UTC)
        assert first_in_windows(evening, [nightly]) == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)

    def test_dst_fall_back_window_spans_the_repeated_hour(self) -> None:
        # 2026-10-25 Berlin: 03:00 CEST falls back to 02:00 CET. A 2 h window opening at
        # 01:30 CEST (23:30 UTC) lasts until 01:30 UTC, i.e. 02:30 CET, the second time.
        nightly = _window("30 1 * * *", hours=2)
        inside = datetime(2026, 10, 25, 1, 15, tzinfo=UTC)  # 02:15 CET, second pass
        assert first_in_windows(inside, [nightly]) == inside
        after = datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
        assert first_in_windows(after, [nightly]) == datetime(2026, 10, 26, 0, 30, tzinfo=UTC)


class TestSpec:
    def _spec(self, renewal: Any) -> dict[str, Any]:
        return {"dnsNames": ["a.example.test"], "issuerRef": {"name": "x"}, "renewal": renewal}

    def test_valid_spec_is_normalized(self) -> None:
        spec = validate_certificate_spec(
            "a",
            self._spec(
                {
                    "windows": [
                        {
                            "cron": " 0 22 * * sat ",
                            "timezone": "Europe/Berlin",
                            "windowDuration": "240m",
                        }
                    ]
                }
            ),
            issuer_exists=None,
        )
        assert spec["renewal"] == {
            "windows": [
                {"cron": "0 22 * * sat", "timezone": "Europe/Berlin", "windowDuration": "4h0m0s"}
            ]
        }
        assert windows_of(spec["renewal"])[0].duration == 4 * H

    def test_errors_name_each_field(self) -> None:
        with pytest.raises(SpecError) as caught:
            validate_certificate_spec(
                "a",
                self._spec(
                    {
                        "policy": "Sometimes",
                        "windows": [
                            {
                                "cron": "0 25 * * *",
                                "timezone": "Mars/Olympus",
                                "windowDuration": "soon",
                            },
                            {"cron": "0 1 * * *", "extra": 1},
                            {"cron": "0 0 31 4 *", "windowDuration": "1h"},
                        ],
                    }
                ),
                issuer_exists=None,
            )
        errors = caught.value.as_dict()
        assert "Disabled" in " ".join(errors["spec.renewal.policy"])
        assert "hour: 25" in " ".join(errors["spec.renewal.windows[0].cron"])
        assert "Mars/Olympus" in " ".join(errors["spec.renewal.windows[0].timezone"])
        assert "spec.renewal.windows[0].windowDuration" in errors
        assert "spec.renewal.windows[1].extra" in errors
        assert "is required" in " ".join(errors["spec.renewal.windows[1].windowDuration"])
        assert "matches no date" in " ".join(errors["spec.renewal.windows[2].cron"])


@pytest.mark.django_db
class TestController:
    def test_first_issuance_is_not_held_and_renewal_time_is_in_the_window(self) -> None:
        # A window that opens once a year: the first certificate is issued at once anyway.
        yearly = {"cron": "0 4 1 7 *", "timezone": "UTC", "windowDuration": "1h"}
        cert = make_certificate(
            "held",
            make_selfsigned_issuer(),
            privateKey=EC,
            duration="8760h",
            renewal={"windows": [yearly]},
        )
        drain()
        cert.refresh_from_db()
        assert cert.state == CertificateState.READY and cert.revision == 1
        assert cert.renewal_time is not None and cert.not_after is not None
        # The formula's time (two thirds in) moved to the next 1 July 04:00 UTC.
        opening = cert.renewal_time
        assert (opening.month, opening.day, opening.hour, opening.minute) == (7, 1, 4, 0)
        assert cert.not_before is not None
        formula = cert.not_after - (cert.not_after - cert.not_before) / 3
        assert formula - timedelta(hours=1) <= opening  # never earlier than the formula
        assert opening - formula < timedelta(days=366)

    def test_forced_renewal_ignores_windows(self) -> None:
        yearly = {"cron": "0 4 1 7 *", "timezone": "UTC", "windowDuration": "1h"}
        cert = make_certificate(
            "forced", make_selfsigned_issuer(), privateKey=EC, renewal={"windows": [yearly]}
        )
        drain()
        cert.refresh_from_db()
        assert cert.revision == 1 and cert.renewal_time is not None
        assert (cert.renewal_time.month, cert.renewal_time.day) == (7, 1)  # held till July
        actions.force_renew(cert, "bob")
        drain()
        cert.refresh_from_db()
        assert cert.revision == 2

    def test_disabled_policy_has_no_renewal_time(self) -> None:
        cert = make_certificate(
            "off", make_selfsigned_issuer(), privateKey=EC, renewal={"policy": "Disabled"}
        )
        drain()
        cert.refresh_from_db()
        assert cert.revision == 1 and cert.renewal_time is None
        # Even a CA's ARI suggestion in the past does not renew it.
        assert cert.not_before is not None
        Certificate.objects.filter(pk=cert.pk).update(
            ari_renewal_time=cert.not_before + timedelta(minutes=1), due_at=timezone.now()
        )
        cert.refresh_from_db()
        secret = Secret.objects.get(name=cert.secret_name)
        assert compute_renewal_time(cert, cert_info(secret.tls_crt)) is None
        step(cert)
        drain()
        cert.refresh_from_db()
        assert cert.revision == 1


@pytest.mark.django_db
def test_page_shows_windows_and_disabled_policy(role_users: dict[str, Any]) -> None:
    issuer = make_selfsigned_issuer()
    window = {"cron": "0 22 * * sat", "timezone": "Europe/Berlin", "windowDuration": "4h"}
    make_certificate("windowed", issuer, privateKey=EC, renewal={"windows": [window]})
    make_certificate("off", issuer, privateKey=EC, renewal={"policy": "Disabled"})
    drain()
    client = Client()
    client.force_login(role_users["viewer"])
    windowed = client.get(reverse("web:certificate-detail", args=["windowed"])).content.decode()
    assert "<code>0 22 * * sat</code> Europe/Berlin for 4 hours" in windowed
    assert "renewal-disabled" not in windowed
    off = client.get(reverse("web:certificate-detail", args=["off"])).content.decode()
    assert "renewal-disabled" in off and "Renewal windows" not in off
