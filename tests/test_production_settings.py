"""The production profile and the security settings, as console/settings.py reads them from
the environment: each case imports the settings in a fresh interpreter with that
environment, as a server process starts. A value the settings cannot use stops the start-up
with a message that names the variable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from issuance import environment

ROOT = Path(__file__).resolve().parents[1]
VARIABLES = (
    "PRODUCTION",
    "DEBUG",
    "SECURE_SSL_REDIRECT",
    "SECURE_COOKIES",
    "SECURE_HSTS_SECONDS",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD",
    "TRUST_PROXY_HEADER",
    "SESSION_COOKIE_AGE",
    "SESSION_IDLE_TIMEOUT",
)
READ = """
import json
from console import settings as s
print(json.dumps({name: getattr(s, name) for name in (
    "SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
    "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD",
    "SECURE_PROXY_SSL_HEADER", "SESSION_COOKIE_AGE", "SESSION_IDLE_TIMEOUT")}))
"""


def start(**variables: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(variables)
    return subprocess.run(
        [sys.executable, "-c", READ], check=False, cwd=ROOT, env=env, capture_output=True, text=True
    )


def settings_with(**variables: str) -> dict[str, Any]:
    run = start(**variables)
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def test_development_defaults_keep_plain_http_working() -> None:
    s = settings_with()
    assert s["SECURE_SSL_REDIRECT"] is False
    assert s["SESSION_COOKIE_SECURE"] is False and s["CSRF_COOKIE_SECURE"] is False
    assert s["SECURE_HSTS_SECONDS"] == 0
    assert s["SECURE_PROXY_SSL_HEADER"] is None
    # Shorter than Django's 14 days; the idle limit is on by default.
    assert s["SESSION_COOKIE_AGE"] == 12 * 3600
    assert s["SESSION_IDLE_TIMEOUT"] == 30 * 60


def test_the_production_profile_turns_everything_on() -> None:
    s = settings_with(PRODUCTION="1", TRUST_PROXY_HEADER="X-Forwarded-Proto")
    assert s["SECURE_SSL_REDIRECT"] is True
    assert s["SESSION_COOKIE_SECURE"] is True and s["CSRF_COOKIE_SECURE"] is True
    assert s["SECURE_HSTS_SECONDS"] == 365 * 24 * 3600
    assert s["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert s["SECURE_HSTS_PRELOAD"] is True
    assert s["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]


def test_each_setting_can_differ_from_the_profile() -> None:
    s = settings_with(
        PRODUCTION="yes",
        SECURE_SSL_REDIRECT="0",
        SECURE_HSTS_SECONDS="300",
        SECURE_HSTS_PRELOAD="off",
        SESSION_COOKIE_AGE="8h",
        SESSION_IDLE_TIMEOUT="0",
    )
    assert s["SECURE_SSL_REDIRECT"] is False
    assert s["SESSION_COOKIE_SECURE"] is True
    assert s["SECURE_HSTS_SECONDS"] == 300
    assert s["SECURE_HSTS_PRELOAD"] is False
    assert s["SESSION_COOKIE_AGE"] == 8 * 3600
    assert s["SESSION_IDLE_TIMEOUT"] == 0
    # And on without the profile (a staging host over HTTPS).
    assert settings_with(SECURE_COOKIES="true")["SESSION_COOKIE_SECURE"] is True


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("PRODUCTION", "ture"),
        ("SECURE_SSL_REDIRECT", "maybe"),
        ("SECURE_HSTS_SECONDS", "a year"),
        ("SECURE_HSTS_SECONDS", "-1"),
        ("TRUST_PROXY_HEADER", "X-Forwarded-Proto: https"),
        ("SESSION_COOKIE_AGE", "12 hours"),
        ("SESSION_COOKIE_AGE", "0"),
        ("SESSION_IDLE_TIMEOUT", "soon"),
    ],
)
def test_a_bad_value_stops_the_start_naming_the_variable(name: str, value: str) -> None:
    run = start(**{name: value})
    assert run.returncode != 0
    last_line = run.stderr.strip().splitlines()[-1]
    assert "BadValue" in last_line and name in last_line, run.stderr


def test_bad_values_name_the_variable_in_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_THREADS", "eight")
    with pytest.raises(environment.BadValue, match=r"^WORKER_THREADS='eight': expected integer"):
        environment.WORKER_THREADS.value()
    monkeypatch.setenv("KUBE_CONNECTOR", "enabled")
    with pytest.raises(environment.BadValue, match=r"^KUBE_CONNECTOR='enabled'"):
        environment.KUBE_CONNECTOR.value()
    # Flags still take the usual words either way, and empty is off.
    for word, expected in (("On", True), ("no", False), ("", False)):
        monkeypatch.setenv("KUBE_CONNECTOR", word)
        assert environment.KUBE_CONNECTOR.value() is expected
