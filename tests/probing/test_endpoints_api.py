"""The endpoints API, "Check now" through the API and the worker's probe step, the status's
deployment summary, certctl's `endpoints` verbs and the certificate page's card."""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from issuance.models import Endpoint, Event
from issuance.probing import runner
from issuance.worker.loop import Worker
from tests.helpers import wait_for
from tests.probing.conftest import Issued
from tests.probing.servers import closed_port, tls_server


def _api(make_user: Callable[..., User], role: str) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=make_user(role, role))
    return client


@pytest.mark.django_db
def test_add_list_and_remove(issued: Issued, make_user: Callable[..., User]) -> None:
    client = _api(make_user, "operator")
    url = "/api/v1/certificates/web/endpoints/"
    created = client.post(
        url, {"host": "Web-1.Example.test", "serverName": "web.example.test"}, format="json"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["host"], body["port"], body["protocol"]) == ("web-1.example.test", 443, "tls")
    assert body["serverName"] == "web.example.test"
    assert body["lastProbe"] is None
    again = client.post(url, {"host": "web-1.example.test"}, format="json")
    assert again.status_code == 201  # another SNI name ("" = the host): another endpoint
    smtp = client.post(url, {"host": "mx.example.test", "protocol": "smtp"}, format="json")
    assert smtp.json()["port"] == 587
    listed = client.get(url).json()
    assert [e["address"] for e in listed] == [
        "mx.example.test:587",
        "web-1.example.test:443",
        "web-1.example.test:443 (web.example.test)",
    ]
    gone = client.delete(f"{url}{body['id']}/")
    assert gone.status_code == 204
    assert Endpoint.objects.count() == 2
    assert Event.objects.filter(reason="EndpointRemoved", actor="operator").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"host": "bad host"}, "host"),
        ({"host": "web.example.test", "port": 70000}, "port"),
        ({"host": "web.example.test", "protocol": "gopher"}, "protocol"),
        ({"host": "web.example.test", "serverName": "not a name"}, "serverName"),
        ({"host": "web.example.test", "colour": "blue"}, "colour"),
    ],
)
def test_bad_input_names_the_field_and_stores_nothing(
    issued: Issued, make_user: Callable[..., User], body: dict[str, object], field: str
) -> None:
    response = _api(make_user, "operator").post(
        "/api/v1/certificates/web/endpoints/", body, format="json"
    )
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not Endpoint.objects.exists()


@pytest.mark.django_db
def test_viewer_reads_but_cannot_add_or_check(
    issued: Issued, make_user: Callable[..., User]
) -> None:
    issued.endpoint(443)
    client = _api(make_user, "viewer")
    assert client.get("/api/v1/certificates/web/endpoints/").status_code == 200
    refused = client.post("/api/v1/certificates/web/check-endpoints/", format="json")
    assert refused.status_code == 403
    assert "operator" in refused.json()["detail"]
    assert (
        client.post(
            "/api/v1/certificates/web/endpoints/", {"host": "a.example.test"}, format="json"
        ).status_code
        == 403
    )


def test_check_now_through_the_api_is_probed_by_the_worker_step(
    issued_committed: Issued, make_user: Callable[..., User]
) -> None:
    issued = issued_committed
    pair = issued.revisions[1]
    with tls_server(pair.chain, pair.key) as port:
        endpoint = issued.endpoint(port)
        # Probed once already, with the next scheduled probe hours away.
        Endpoint.objects.filter(pk=endpoint.pk).update(
            next_probe_at=timezone.now() + timedelta(hours=5)
        )
        assert runner.claim(10, timezone.now()) == []
        answer = _api(make_user, "operator").post("/api/v1/certificates/web/check-endpoints/")
        assert answer.status_code == 202
        worker = Worker(threads=1)
        try:
            worker.run_steps()
            found = wait_for(
                lambda: Endpoint.objects.filter(pk=endpoint.pk, probed_at__isnull=False).first(),
                timeout=15,
                what="the probe step's result",
            )
        finally:
            worker.close()
    assert (found.match, found.served_revision) == ("previous", 1)
    assert found.next_probe_at > timezone.now()
    status = APIClient()
    status.force_authenticate(user=User.objects.get(username="operator"))
    cert = status.get("/api/v1/certificates/web/").json()["status"]
    assert cert["deployment"]["state"] == "Deploying"
    assert cert["endpoints"][0]["revision"] == 1
    # An hour after the current revision was issued, the older one is stale.
    Endpoint.objects.filter(pk=endpoint.pk).update(
        revision_issued_at=timezone.now() - timedelta(hours=2),
        created_at=timezone.now() - timedelta(hours=2),
    )
    cert = status.get("/api/v1/certificates/web/").json()["status"]
    assert cert["deployment"]["state"] == "Stale"
    assert cert["deployment"]["stale"] == [found.address]


@pytest.mark.django_db
def test_a_new_revision_makes_the_endpoints_due(issued: Issued) -> None:
    from issuance.operations import actions
    from tests.helpers import drain

    endpoint = issued.endpoint(closed_port())
    Endpoint.objects.filter(pk=endpoint.pk).update(
        next_probe_at=timezone.now() + timedelta(hours=5)
    )
    actions.force_renew(issued.cert, actor="test")
    with pytest.MonkeyPatch.context() as patch:  # the step's threads: not in this test
        patch.setattr(runner, "step", lambda: False)
        drain()
    endpoint.refresh_from_db()
    assert endpoint.next_probe_at <= timezone.now()
    assert endpoint.revision_issued_at is not None


@pytest.mark.django_db
def test_certctl_endpoints(issued: Issued) -> None:
    pair = issued.revisions[2]
    with tls_server(pair.chain, pair.key) as port:
        out = io.StringIO()
        call_command(
            "certctl",
            "endpoints",
            "add",
            "web",
            f"127.0.0.1:{port}",
            "--server-name",
            "web.example.test",
            stdout=out,
        )
        assert "added" in out.getvalue()
        out = io.StringIO()
        call_command("certctl", "endpoints", "check", "web", stdout=out)
    text = out.getvalue()
    assert "Deployed, 1 of 1 endpoint serves the current revision" in text
    assert f"127.0.0.1:{port} (web.example.test)" in text
    assert Event.objects.filter(reason="EndpointCheckRequested").exists()
    with pytest.raises(CommandError, match="port: must be between 1 and 65535"):
        call_command("certctl", "endpoints", "add", "web", "127.0.0.1:0")


@pytest.mark.django_db
def test_certificate_page_shows_the_latest_probe(
    issued: Issued, make_user: Callable[..., User]
) -> None:
    pair = issued.revisions[1]
    with tls_server(pair.chain, pair.key) as port:
        runner.probe_endpoint(issued.endpoint(port).pk)
    client = Client()
    client.force_login(make_user("viewer", "viewer"))
    page = client.get("/certificates/web/").content.decode()
    assert "Endpoints" in page
    assert "revision 1 (1 behind)" in page
    assert "Check now" not in page  # viewers see, operators act
    operator = Client()
    operator.force_login(make_user("operator", "operator"))
    page = operator.get("/certificates/web/").content.decode()
    assert 'id="check-endpoints"' in page
    response = operator.post("/certificates/web/endpoints/check/")
    assert response.status_code == 302
    assert Endpoint.objects.get().next_probe_at <= timezone.now()
