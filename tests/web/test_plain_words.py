"""Issue 25, items 5 and 7: durations as people write and read them, form errors in the form's
own words, plain strings instead of jargon, and the small fixes of the pages (threshold
default, copy buttons, the RBAC link, the stats endpoint's pointer to the charts)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from console.web.forms import NewCertificateForm
from issuance.models import Certificate, CertificateRequest, Issuer
from issuance.timing.durations import (
    DurationError,
    describe_duration,
    go_duration,
    parse_duration,
    parse_friendly_duration,
)
from tests.controllers.helpers import latest_request, manual_issuer, step, step_request
from tests.factories import make_certificate

pytestmark = pytest.mark.django_db

ClientFor = Callable[[str | None], Client]
DAY = 86400


# -- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("typed", "seconds"),
    [
        ("90d", 90 * DAY),
        ("90 days", 90 * DAY),
        ("1 day", DAY),
        ("2160h", 90 * DAY),
        ("2160h0m0s", 90 * DAY),
        ("12h30m", 12 * 3600 + 1800),
        ("12 hours 30 minutes", 12 * 3600 + 1800),
        ("2 weeks, 3 days and 4h", 17 * DAY + 4 * 3600),
        ("1.5h", 5400),
        ("  30 Days ", 30 * DAY),
        ("45s", 45),
    ],
)
def test_friendly_durations_parse(typed: str, seconds: int) -> None:
    assert parse_friendly_duration(typed) == timedelta(seconds=seconds)


@pytest.mark.parametrize("typed", ["", "forever", "90", "3 months", "1 year", "90 dayz"])
def test_friendly_durations_refuse_what_is_not_a_length(typed: str) -> None:
    with pytest.raises(DurationError, match="90d, 90 days"):
        parse_friendly_duration(typed)


def test_go_form_and_words() -> None:
    assert go_duration(timedelta(days=90)) == "2160h"
    assert go_duration(timedelta(hours=12, minutes=30)) == "12h30m"
    assert go_duration(timedelta(hours=1, seconds=5)) == "1h5s"
    # The Go form parses back to the same value (it is what the spec keeps).
    assert parse_duration(go_duration(timedelta(hours=1, seconds=5))) == timedelta(seconds=3605)
    assert describe_duration(timedelta(days=90)) == "90 days"
    assert describe_duration(timedelta(days=1, hours=1)) == "1 day 1 hour"
    assert describe_duration(timedelta(hours=12, minutes=30)) == "12 hours 30 minutes"


def test_the_api_keeps_go_durations_only(role_users: dict[str, User], issuer: Issuer) -> None:
    """cert-manager manifests apply as written: the API does not widen to '90 days'."""
    api = APIClient()
    api.force_authenticate(role_users["operator"])
    spec = {"dnsNames": ["api.example.test"], "issuerRef": {"name": issuer.name}}
    bad = api.post(
        "/api/v1/certificates/",
        {"name": "api", "spec": {**spec, "duration": "90 days"}},
        format="json",
    )
    assert bad.status_code == 400, bad.content
    assert "spec.duration" in bad.content.decode()
    assert not Certificate.objects.filter(name="api").exists()


def _new(client: Client, name: str, **fields: str) -> str:
    data = {
        "name": name,
        "issuer": "selfsigned",
        "dns_names": f"{name}.example.test",
        "key_algorithm": "ECDSA",
        **fields,
    }
    response = client.post("/new-certificate/", data)
    if response.status_code == 302:
        return ""
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    ("duration", "renew_before", "stored"),
    [
        ("90d", "30 days", ("2160h0m0s", "720h0m0s")),
        ("90 days", "12h30m", ("2160h0m0s", "12h30m0s")),
        ("2160h", "", ("2160h0m0s", None)),
    ],
)
def test_the_form_takes_durations_as_people_write_them(
    client_for: ClientFor,
    issuer: Issuer,
    duration: str,
    renew_before: str,
    stored: tuple[str, str | None],
) -> None:
    client = client_for("operator")
    assert _new(client, "web", duration=duration, renew_before=renew_before) == ""
    spec = Certificate.objects.get(name="web").spec
    assert (spec["duration"], spec.get("renewBefore")) == stored  # Go form, as the API keeps
    # Shown back in words: the detail page and the edit form.
    detail = client.get("/certificates/web/").content.decode()
    assert "<dt>Lifetime</dt>" in detail and "90 days" in detail
    assert "2160h0m0s" not in detail.split('class="spec"')[0]  # only the raw spec keeps it
    edit = client.get("/certificates/web/edit/").content.decode()
    assert 'value="90 days"' in edit


def test_the_edit_form_round_trips_without_a_change(client_for: ClientFor, issuer: Issuer) -> None:
    """'90 days' shown, posted back unchanged: the preview sees no change (same value)."""
    client = client_for("operator")
    _new(client, "web", duration="2160h", renew_before="720h")
    cert = Certificate.objects.get(name="web")
    data = {**NewCertificateForm.initial_from(cert.name, cert.spec), "preview": "1"}
    assert data["duration"] == "90 days" and data["renew_before"] == "30 days"
    html = client.post("/certificates/web/edit/", data).content.decode()
    assert "Nothing changed" in html


def test_form_errors_name_the_forms_own_fields(client_for: ClientFor, issuer: Issuer) -> None:
    client = client_for("operator")
    html = _new(client, "nameless", dns_names="", common_name="")
    assert "enter at least one DNS name (or a common name)" in html
    assert "commonName" not in html and "ipAddresses" not in html and "spec." not in html
    html = _new(client, "short", duration="10 days", renew_before="20 days")
    assert "must be less than lifetime (20 days &gt;= 10 days)" in html, html
    html = _new(client, "never", duration="3 months")
    assert "write it like 90d, 90 days, 2 weeks, 2160h or 12h30m" in html
    assert not Certificate.objects.filter(name__in=["nameless", "short", "never"]).exists()


def test_the_form_labels_say_what_the_durations_are(client_for: ClientFor, issuer: Issuer) -> None:
    html = client_for("operator").get("/new-certificate/").content.decode()
    assert ">Lifetime</label>" in html and ">Renew before expiry</label>" in html
    assert "Go duration" not in html


def test_issuer_max_duration_takes_words(client_for: ClientFor) -> None:
    client = client_for("admin")
    response = client.post(
        "/new-issuer/", {"name": "capped", "kind": "selfSigned", "max_duration": "365 days"}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Issuer.objects.get(name="capped").spec["selfSigned"]["maxDuration"] == "8760h0m0s"
    form = client.get("/issuers/capped/edit/").content.decode()
    assert 'value="365 days"' in form


# -- plain strings --------------------------------------------------------------------------


def test_waiting_for_a_person_says_why_in_words() -> None:
    issuer = manual_issuer()
    cert = make_certificate("held", issuer)
    step(cert)
    request = latest_request(cert)
    step_request(request)
    request = CertificateRequest.objects.get(pk=request.pk)
    ready = request.get_condition("Ready")
    assert ready is not None
    message = str(ready.get("message"))
    assert "approves no request automatically (autoApprove: none)" in message, message
    assert "none requests" not in message


def test_approve_and_deny_fields_say_what_they_are_for(
    client_for: ClientFor, issuer: Issuer
) -> None:
    html = client_for("approver").get("/requests/").content.decode()
    assert "reason code" in html and "a sentence for people" in html


# -- the small things -----------------------------------------------------------------------


def test_threshold_starts_empty_as_its_help_says(client_for: ClientFor) -> None:
    html = client_for("admin").get("/notifications/").content.decode()
    start = html.index('name="threshold"')
    tag = html[html.rindex("<input", 0, start) : html.index(">", start)]
    assert "value=" not in tag and 'placeholder="default"' in tag, tag
    assert "leave empty for the default (14 days" in html


def test_the_rbac_file_is_a_link_that_opens(client_for: ClientFor) -> None:
    client = client_for("viewer")
    html = client.get("/clusters/").content.decode()
    assert '<a href="/cluster-rbac.yaml"><code>docs/rbac/issuance-console.yaml</code></a>' in html
    response = client.get("/cluster-rbac.yaml")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert "kind: ClusterRole" in response.content.decode()
    assert Client().get("/cluster-rbac.yaml").status_code == 302  # signed-in users only


def test_a_secret_shown_once_has_a_copy_button(client_for: ClientFor) -> None:
    client = client_for("operator")
    response = client.post("/account/tokens/new/", {"name": "ci"}, follow=True)
    html = response.content.decode()
    assert 'id="token-text"' in html, html[:3000]
    assert '<button type="button" class="copy-button" data-copy="token-text" hidden>' in html


def test_the_stats_api_stays_json_and_points_to_the_charts(
    role_users: dict[str, User],
) -> None:
    api = APIClient()
    api.force_authenticate(role_users["viewer"])
    assert api.get("/api/v1/stats/")["Content-Type"] == "application/json"
    page = api.get("/api/v1/stats/", HTTP_ACCEPT="text/html").content.decode()
    assert 'href="/#dash-charts"' in page


def test_dns_name_errors_say_which_line(client_for: ClientFor, issuer: Issuer) -> None:
    html = _new(client_for("operator"), "dup", dns_names="a.example.test\na.example.test")
    assert "DNS name 2: duplicate of DNS name 1 (&#x27;a.example.test&#x27;)" in html, html
    html = _new(client_for("operator"), "ip", dns_names="192.0.2.1")
    assert (
        "DNS name 1: &#x27;192.0.2.1&#x27; is an IP address: this form takes DNS names only" in html
    )


def test_counts_of_one_are_singular(client_for: ClientFor, issuer: Issuer) -> None:
    make_certificate("only", issuer)
    client = client_for("operator")
    listing = client.get("/certificates/").content.decode()
    assert "1 certificate<" in listing and "1 certificates" not in listing
    confirm = client.post("/bulk/", {"kind": "renew", "names": ["only"]}).content.decode()
    assert "<title>Renew 1 certificate · Issuance Console</title>" in confirm, confirm[:600]


def test_issuer_max_duration_errors_in_words(client_for: ClientFor) -> None:
    response = client_for("admin").post(
        "/new-issuer/", {"name": "capped", "kind": "selfSigned", "max_duration": "forever"}
    )
    html = response.content.decode()
    assert "&#x27;forever&#x27; is not a length of time: write it like 90d, 90 days" in html
    assert "spec.selfSigned.maxDuration" not in html and "use units h, m, s" not in html
    assert not Issuer.objects.filter(name="capped").exists()
