"""/metrics: who may scrape it, and that the numbers are the database's."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families
from pytest_django import Settings

from issuance.acme import health
from issuance.models import AcmeServer, Certificate, CertificateRequest, Challenge, Order
from issuance.observability.metrics import ACME_REQUESTS
from tests.factories import make_certificate, make_selfsigned_issuer

pytestmark = pytest.mark.django_db

# Each sample's labels and value, by sample name.
Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(client: Client | None = None, **extra: Any) -> Samples:
    response = (client or Client()).get("/metrics", **extra)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    matches = [
        v for lab, v in samples.get(metric, []) if all(lab.get(k) == x for k, x in labels.items())
    ]
    assert len(matches) == 1, (metric, labels, samples.get(metric))
    return matches[0]


# -- access control ----------------------------------------------------------------------


def test_loopback_is_allowed_by_default() -> None:
    assert Client().get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="::1").status_code == 200


def test_other_addresses_are_refused(settings: Settings) -> None:
    settings.METRICS_TOKEN = ""
    response = Client().get("/metrics", REMOTE_ADDR="203.0.113.7")
    assert response.status_code == 403
    assert b"METRICS_TOKEN" in response.content
    # A forwarded-for header cannot talk its way in.
    response = Client().get("/metrics", REMOTE_ADDR="203.0.113.7", HTTP_X_FORWARDED_FOR="127.0.0.1")
    assert response.status_code == 403


def test_bearer_token(settings: Settings) -> None:
    settings.METRICS_TOKEN = "s3cret-scrape-token"
    far = "203.0.113.7"
    ok = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-scrape-token", REMOTE_ADDR=far)
    assert ok.status_code == 200
    assert b"issuance_certificates" in ok.content
    for header in ("Bearer wrong", "s3cret-scrape-token", "Basic s3cret-scrape-token", ""):
        response = Client().get("/metrics", HTTP_AUTHORIZATION=header, REMOTE_ADDR=far)
        assert response.status_code == 403, header


def test_empty_token_setting_never_matches(settings: Settings) -> None:
    settings.METRICS_TOKEN = ""
    response = Client().get("/metrics", HTTP_AUTHORIZATION="Bearer ", REMOTE_ADDR="203.0.113.7")
    assert response.status_code == 403


def test_allowed_networks(settings: Settings) -> None:
    settings.METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8", "2001:db8::/32", "not-a-network"]
    assert Client().get("/metrics", REMOTE_ADDR="10.20.30.40").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="2001:db8::5").status_code == 200
    assert Client().get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 403
    assert Client().get("/metrics", REMOTE_ADDR="11.0.0.1").status_code == 403


def test_only_get() -> None:
    assert Client().post("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 405


# -- values --------------------------------------------------------------------------------


def test_metrics_reflect_the_database(settings: Settings) -> None:
    settings.MAX_CONCURRENT_CHALLENGES = 7
    now = timezone.now().replace(microsecond=0)
    issuer = make_selfsigned_issuer("self")
    ready = make_certificate("ready", issuer)
    ready.not_after = now + timedelta(days=60)
    ready.renewal_time = now + timedelta(days=40)
    ready.state = "Ready"
    ready.set_condition("Ready", "True", "Ready", "up to date")
    ready.save()
    failing = make_certificate("failing", issuer)
    failing.state = "Failed"
    failing.failed_issuance_attempts = 3
    failing.next_retry_time = now + timedelta(hours=4)
    failing.set_condition("Ready", "False", "Failed", "denied")
    failing.save()
    make_certificate("fresh", issuer)

    req = CertificateRequest.objects.create(
        name="failing-1", issuer=issuer, certificate=failing, revision=1, spec={}
    )
    CertificateRequest.objects.create(
        name="csr-ext", issuer=issuer, spec={}, approval="Denied", state="Denied"
    )
    order = Order.objects.create(
        name="failing-1-o", request=req, issuer=issuer, spec={}, state="pending"
    )
    for i, processing in enumerate([True, False, False]):
        Challenge.objects.create(
            name=f"ch{i}",
            order=order,
            issuer=issuer,
            dns_name=f"d{i}.test",
            type="http-01",
            authorization_url=f"https://ca.test/a/{i}",
            token=f"t{i}",
            spec={},
            processing=processing,
        )
    AcmeServer.objects.create(
        directory_url="https://ca.test/dir", paused_until=now + timedelta(minutes=5)
    )
    ACME_REQUESTS.labels(action="new_order", result="rate_limited").inc()

    s = scrape()
    exp = "issuance_certificate_expiration_timestamp_seconds"
    assert (
        value(s, exp, name="ready", issuer_name="self", issuer_kind="selfSigned")
        == ready.not_after.timestamp()
    )
    assert [lab["name"] for lab, _ in s[exp]] == ["ready"]  # no notAfter, no series
    assert (
        value(s, "issuance_certificate_renewal_timestamp_seconds", name="ready")
        == ready.renewal_time.timestamp()
    )

    rs = "issuance_certificate_ready_status"
    assert value(s, rs, name="ready", condition="True") == 1
    assert value(s, rs, name="ready", condition="False") == 0
    assert value(s, rs, name="failing", condition="False") == 1
    assert value(s, rs, name="fresh", condition="Unknown") == 1
    assert len(s[rs]) == 9

    assert value(s, "issuance_certificates", state="Ready") == 1
    assert value(s, "issuance_certificates", state="Failed") == 1
    assert value(s, "issuance_certificates", state="Pending") == 1
    assert value(s, "issuance_certificates", state="Expired") == 0
    assert value(s, "issuance_certificates_in_backoff") == 1
    assert value(s, "issuance_failed_issuance_attempts") == 3
    assert value(s, "issuance_certificate_failed_issuance_attempts", name="failing") == 3
    assert (
        value(s, "issuance_certificate_next_retry_timestamp_seconds", name="failing")
        == failing.next_retry_time.timestamp()
    )

    assert value(s, "issuance_certificate_requests", approval="Pending", state="Pending") == 1
    assert value(s, "issuance_certificate_requests", approval="Denied", state="Denied") == 1
    assert value(s, "issuance_certificate_requests", approval="Approved", state="Issued") == 0
    assert value(s, "issuance_orders", state="pending") == 1
    assert value(s, "issuance_orders", state="valid") == 0

    assert value(s, "issuance_scheduler_challenges_processing") == 1
    assert value(s, "issuance_scheduler_challenges_queued") == 2
    assert value(s, "issuance_scheduler_challenges_cap") == 7
    assert value(s, "issuance_issuer_ready_status", name="self", condition="Unknown") == 1
    paused = "issuance_acme_server_paused_until_timestamp_seconds"
    assert (
        value(s, paused, directory_url="https://ca.test/dir")
        == (now + timedelta(minutes=5)).timestamp()
    )
    assert value(s, "issuance_acme_requests_total", action="new_order", result="rate_limited") >= 1

    # The numbers follow the database, not a cache: an expired backoff is no longer counted.
    Certificate.objects.filter(name="failing").update(next_retry_time=now - timedelta(seconds=1))
    assert value(scrape(), "issuance_certificates_in_backoff") == 0


def test_scrape_cost_does_not_grow_with_certificates() -> None:
    issuer = make_selfsigned_issuer()

    def queries() -> int:
        health.forget()  # each scrape reads the outages (cached for a second per process)
        with CaptureQueriesContext(connection) as ctx:
            scrape()
        return len(ctx.captured_queries)

    for i in range(3):
        make_certificate(f"c{i}", issuer)
    few = queries()
    Certificate.objects.bulk_create(
        Certificate(name=f"bulk{i}", issuer=issuer, spec={}, secret_name=f"bulk{i}")
        for i in range(300)
    )
    many = queries()
    assert many == few
    assert few <= 13  # 12, and one for the endpoints (issuance_endpoints)
    assert len(scrape()["issuance_certificate_ready_status"]) == 3 * 303
