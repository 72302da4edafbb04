"""/healthz and /readyz (console/probes.py) through the real middleware stack: answered for
any Host, over plain HTTP with the HTTPS redirect on, without a session; /healthz never
touches the database, /readyz names what makes it unready. The real PostgreSQL outage is
tests/e2e/test_pg_outage_web.py's part."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client
from pytest_django import Settings

from console import probes
from tests.dbfaults import held_down


def _probe(path: str, **extra: str) -> tuple[int, dict[str, object]]:
    response = Client().get(path, **extra)  # type: ignore[arg-type]
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    return response.status_code, json.loads(response.content)


def test_healthz_answers_without_the_database(settings: Settings) -> None:
    # No django_db mark: any database access in this test raises.
    settings.SECURE_SSL_REDIRECT = True  # the production profile's redirect spares probes
    status, body = _probe("/healthz", HTTP_HOST="10.1.2.3:8000")
    assert (status, body) == (200, {"status": "ok"})


@pytest.mark.django_db
def test_healthz_is_200_while_the_database_is_down() -> None:
    with held_down():
        status, body = _probe("/healthz")
    assert (status, body) == (200, {"status": "ok"})


@pytest.mark.django_db
def test_readyz_is_ready_with_migrations_applied(settings: Settings) -> None:
    settings.SECURE_SSL_REDIRECT = True
    status, body = _probe("/readyz", HTTP_HOST="10.1.2.3")
    assert status == 200
    assert body == {
        "status": "ready",
        "database": "ok",
        "reason": "",
        "channelLayer": {"backend": "in-memory", "state": "working", "error": ""},
    }


@pytest.mark.django_db
def test_readyz_is_503_with_an_unapplied_migration(monkeypatch: pytest.MonkeyPatch) -> None:
    # A web process of a newer release started before `migrate`: its last migration is not
    # recorded as applied (the row is gone inside this test's transaction).
    monkeypatch.setattr(probes.migrations, "all_applied", False)
    recorder = MigrationRecorder(connection)
    last = max(name for app, name in recorder.applied_migrations() if app == "issuance")
    recorder.migration_qs.filter(app="issuance", name=last).delete()
    status, body = _probe("/readyz")
    assert status == 503
    assert body["status"] == "not ready" and body["database"] == "unapplied migrations"
    assert body["reason"] == f"1 unapplied migration(s): issuance.{last} (run `migrate`)"


@pytest.mark.django_db
def test_readyz_is_503_while_the_database_is_down(caplog: pytest.LogCaptureFixture) -> None:
    with held_down():
        status, body = _probe("/readyz")
        status, body = _probe("/readyz")
    assert status == 503
    # Probes come every few seconds: the outage is logged once elsewhere, not per probe.
    assert not [r for r in caplog.records if r.name == "django.request"]
    assert body["database"] == "unavailable" and body["reason"] == "database unavailable"
    assert body["status"] == "not ready"


def test_probes_take_get_and_head_only() -> None:
    response = Client().post("/healthz")
    assert response.status_code == 405 and response["Allow"] == "GET, HEAD"
    assert Client().head("/healthz").status_code == 200
