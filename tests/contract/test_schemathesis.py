"""The API contract: schemathesis finds no difference between the OpenAPI schema and the API.

With a superuser's API token over the main API except /api/v1/certificates/ (its own module,
test_schemathesis_certificates.py, as it is two thirds of the cases), and with a bootstrap
token over the bootstrap API. How a run works: tests/contract/runner.py.
"""

from __future__ import annotations

from pathlib import Path

from tests.contract.runner import (
    BOOTSTRAP_PATHS,
    CERTIFICATE_PATHS,
    MARKS,
    Served,
    assert_clean,
    run_schemathesis,
)

pytestmark = MARKS


def test_main_api_with_an_admin_token(served: Served, tmp_path: Path) -> None:
    run = run_schemathesis(
        served,
        f"Token {served.credentials.admin_token}",
        ["--exclude-path-regex", f"{BOOTSTRAP_PATHS}|{CERTIFICATE_PATHS}"],
        tmp_path,
    )
    assert_clean(run, {200, 201, 202, 204, 400, 401, 404, 405, 409})


def test_bootstrap_api_with_a_bootstrap_token(served: Served, tmp_path: Path) -> None:
    run = run_schemathesis(
        served,
        f"Bearer {served.credentials.bootstrap_token}",
        ["--include-path-regex", BOOTSTRAP_PATHS],
        tmp_path,
    )
    assert_clean(run, {200, 201, 400, 401, 404, 405, 415})
