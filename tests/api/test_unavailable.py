"""503 when the database cannot be reached: which errors count, API/page answers, schema.

In-process (Django's test client) with real driver errors (tests/dbfaults.py); the real
outage, a stopped PostgreSQL under `manage.py serve`, is tests/e2e/test_pg_outage_web.py.
"""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, IntegrityError, OperationalError, connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from psycopg_pool import ConnectionPool, PoolTimeout
from pytest_django import Settings
from rest_framework.test import APIClient

from issuance.availability import DatabaseUnavailable, availability, is_unavailable_error
from tests.dbfaults import connection_error, held_down, probe_fails, recovers, unreachable
from tests.e2e.servers import free_port

UNAVAILABLE = {
    "detail": "The database is unavailable; retry shortly.",
    "code": "database_unavailable",
}


@pytest.fixture
def admin(db: None) -> User:
    return User.objects.create_superuser("root", "root@example.test", "pw")


@pytest.fixture
def api(admin: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(admin)
    return client


@pytest.fixture
def browser(admin: User) -> Client:
    # Errors that reach Django's handler become responses, as in production.
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    return client


def assert_api_503(response: Any) -> None:
    assert response.status_code == 503
    assert response["Content-Type"] == "application/json"
    assert response.json() == UNAVAILABLE
    assert int(response["Retry-After"]) > 0
    assert "no-store" in response["Cache-Control"]


def assert_page_503(response: Any) -> None:
    assert response.status_code == 503
    assert response["Content-Type"].startswith("text/html")
    body = response.content.decode()
    assert "The database is unavailable" in body and "Traceback" not in body


# -- which errors mean "no database" ---------------------------------------------------


def test_refused_connections_and_pool_timeouts_count() -> None:
    assert is_unavailable_error(connection_error())
    with pytest.raises(psycopg.OperationalError) as refused:
        psycopg.connect(f"host=127.0.0.1 port={free_port()}")
    assert is_unavailable_error(refused.value)
    pool = ConnectionPool(
        f"host=127.0.0.1 port={free_port()}", min_size=0, max_size=1, timeout=0.3, open=True
    )
    try:
        with pytest.raises(PoolTimeout) as timed_out:
            pool.getconn()
    finally:
        pool.close()
    assert is_unavailable_error(timed_out.value)
    assert is_unavailable_error(DatabaseUnavailable("down"))


@pytest.mark.postgres
def test_lock_and_statement_timeouts_do_not_count(transactional_db: None) -> None:
    """Real server errors of one statement: the database is there."""
    db = settings.DATABASES["default"]
    dsn = f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname={db['NAME']}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET statement_timeout = 10")
        with pytest.raises(psycopg.errors.QueryCanceled) as cancelled:
            conn.execute("SELECT pg_sleep(1)")
    assert not is_unavailable_error(cancelled.value)
    with psycopg.connect(dsn) as holder, psycopg.connect(dsn, autocommit=True) as other:
        holder.execute("LOCK TABLE auth_user")
        other.execute("SET lock_timeout = 10")
        with pytest.raises(psycopg.errors.LockNotAvailable) as locked:
            other.execute("SELECT 1 FROM auth_user FOR UPDATE")
        holder.rollback()
    assert not is_unavailable_error(locked.value)
    assert not is_unavailable_error(IntegrityError("duplicate key"))
    assert not is_unavailable_error(DatabaseError("connection lost (injected)"))
    assert not is_unavailable_error(OperationalError("database is locked"))  # SQLite


# -- API and pages ----------------------------------------------------------------------


def test_api_answers_503_json_and_the_next_requests_skip_the_database(api: APIClient) -> None:
    with recovers(), probe_fails():
        with unreachable():
            assert_api_503(api.get("/api/v1/certificates/"))
        assert availability.down  # the first failure is enough
    assert not availability.down
    assert api.get("/api/v1/certificates/").status_code == 200


def test_while_down_requests_are_answered_without_any_query(
    api: APIClient, browser: Client
) -> None:
    with held_down(), CaptureQueriesContext(connection) as queries:
        assert_api_503(api.get("/api/v1/certificates/"))
        assert_api_503(api.post("/api/v1/certificates/", {"name": "x"}, format="json"))
        assert_page_503(browser.get("/"))
        # Static files need no database.
        assert browser.get("/static/js/live.js").status_code == 200
    assert queries.captured_queries == []
    assert api.get("/api/v1/certificates/").status_code == 200


def test_pages_answer_a_plain_503_page(browser: Client) -> None:
    with recovers(), unreachable():
        page = browser.get("/certificates/")
        assert_page_503(page)
        assert b'<meta http-equiv="refresh" content="5">' in page.content  # reloads itself
        form = browser.post("/new-certificate/", {"name": "x"})
        assert_page_503(form)
        assert b"refresh" not in form.content  # never resends a form by itself


def test_clients_asking_for_json_get_json_anywhere(browser: Client) -> None:
    with recovers(), unreachable():
        response = browser.get("/certificates/", HTTP_ACCEPT="application/json")
    assert response.status_code == 503 and response.json() == UNAVAILABLE


def test_an_error_in_another_middleware_becomes_503_too(
    browser: Client, settings: Settings
) -> None:
    """The CSRF middleware loads the session before any view runs."""
    settings.CSRF_USE_SESSIONS = True
    with recovers(), unreachable():
        assert_page_503(browser.get("/certificates/"))
        assert_api_503(browser.get("/api/v1/certificates/"))


def test_a_session_not_saved_on_the_way_out_becomes_503(
    browser: Client, settings: Settings
) -> None:
    """The view answered; saving the session fails (Django reports it as a 400)."""
    settings.SESSION_SAVE_EVERY_REQUEST = True

    def session_write(sql: str) -> bool:
        return "django_session" in sql and not sql.lstrip().upper().startswith("SELECT")

    with recovers(), unreachable(when=session_write):
        assert_page_503(browser.get("/certificates/"))


def test_a_plain_bad_request_stays_400(browser: Client) -> None:
    response = browser.get("/certificates/", HTTP_HOST="not-allowed.example.test")
    assert response.status_code == 400
    assert not availability.down


def test_other_database_errors_stay_errors(browser: Client) -> None:
    with connection.execute_wrapper(_raise(DatabaseError("disk full (injected)"))):
        response = browser.get("/certificates/")
    assert response.status_code == 500
    assert not availability.down


def test_a_probe_that_reaches_the_database_marks_it_up(
    transactional_db: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The real probe after a failure, on its own thread. (Not asserted in between: the
    probe may find the database before this thread looks, within a millisecond.)"""
    availability.failed(connection_error())
    assert availability.wait_until_up(10)
    assert not availability.down
    said = [r.getMessage() for r in caplog.records if r.name == "issuance.availability"]
    assert [line.split(" (")[0].split(" after ")[0] for line in said] == [
        "database unavailable",
        "database available again",
    ]
    # The probe marks the database up and then ends: it must not linger.
    for probe in [t for t in threading.enumerate() if t.name == "db-probe"]:
        probe.join(5)
        assert not probe.is_alive()


def test_schema_documents_the_503(api: APIClient) -> None:
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    component = schema["components"]["schemas"]["DatabaseUnavailable"]
    assert component["properties"]["code"]["enum"] == ["database_unavailable"]
    operations = [op for item in schema["paths"].values() for op in item.values()]
    assert operations
    for operation in operations:
        answer = operation["responses"]["503"]
        assert "Retry-After" in answer["headers"]
        ref = answer["content"]["application/json"]["schema"]["$ref"]
        assert ref == "#/components/schemas/DatabaseUnavailable"


def _raise(error: Exception) -> Any:
    def wrapper(execute: Any, sql: str, *args: Any) -> Any:
        raise error

    return wrapper
