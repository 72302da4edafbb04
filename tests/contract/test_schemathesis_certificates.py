"""The API contract of /api/v1/certificates/ (the Certificate spec's every boundary case, two
thirds of the main API's): schemathesis with a superuser's API token finds no difference
between the OpenAPI schema and the API. The rest of the API: test_schemathesis.py; how a run
works: tests/contract/runner.py."""

from __future__ import annotations

from pathlib import Path

from tests.contract.runner import (
    CERTIFICATE_PATHS,
    MARKS,
    Served,
    assert_clean,
    run_schemathesis,
)

pytestmark = MARKS


def test_certificates_api_with_an_admin_token(served: Served, tmp_path: Path) -> None:
    run = run_schemathesis(
        served,
        f"Token {served.credentials.admin_token}",
        ["--include-path-regex", CERTIFICATE_PATHS],
        tmp_path,
    )
    assert_clean(run, {200, 201, 202, 204, 400, 401, 404, 405, 409})
