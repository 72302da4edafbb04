"""/api/v1/downloadtokens/: operators create (token shown once), list and revoke."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from issuance.delivery.downloadtokens import create_download_token
from issuance.models import Certificate, DownloadToken
from tests.factories import make_ca_issuer, make_certificate

URL = "/api/v1/downloadtokens/"


@pytest.fixture
def operator(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> APIClient:
    make_certificate("web", make_ca_issuer())
    return api_client_for(role_users["operator"])


def test_create_shows_the_token_once(operator: APIClient) -> None:
    created = operator.post(
        URL, {"name": "web1", "certificate": "web", "keystorePassword": "pw"}, format="json"
    )
    assert created.status_code == 201, created.content
    body = created.json()
    text = body["token"]
    assert DownloadToken.objects.get().digest == hashlib.sha256(text.encode()).hexdigest()
    assert body["certificate"] == "web" and body["hasKeystorePassword"] is True
    assert body["createdBy"] == "operator"
    listed = operator.get(URL).json()
    assert listed["results"][0]["prefix"] == text[:8]
    assert text not in operator.get(URL).content.decode()
    assert "token" not in listed["results"][0]
    detail = operator.get(f"{URL}{body['id']}/")
    assert text not in detail.content.decode() and "pw" not in detail.json().values()


def test_create_errors_name_the_field(operator: APIClient) -> None:
    unknown = operator.post(URL, {"name": "x", "certificate": "nope"}, format="json")
    assert unknown.status_code == 400 and unknown.json()["certificate"] == ["unknown certificate"]
    bad = operator.post(URL, {"name": "x", "certificate": "Web/../x"}, format="json")
    assert bad.status_code == 400 and "certificate" in bad.json()
    control = operator.post(URL, {"name": "a\x00b", "certificate": "web"}, format="json")
    assert control.status_code == 400 and "name" in control.json()
    number = operator.post(URL, {"name": 5, "certificate": "web"}, format="json")
    assert number.status_code == 400 and "name" in number.json()
    extra = operator.post(URL, {"name": "x", "certificate": "w*", "admin": True}, format="json")
    assert extra.status_code == 400 and "admin" in extra.json()
    assert not DownloadToken.objects.exists()


def test_revoke_stops_downloads(operator: APIClient) -> None:
    created = operator.post(URL, {"name": "fleet", "certificate": "web*"}, format="json").json()
    revoked = operator.post(f"{URL}{created['id']}/revoke/")
    assert revoked.status_code == 200 and revoked.json()["revokedAt"] is not None
    answer = Client().get(
        "/download/web/tls.crt", headers={"Authorization": f"Bearer {created['token']}"}
    )
    assert answer.status_code == 401
    assert operator.post(f"{URL}999999/revoke/").status_code == 404


def test_roles(
    role_users: dict[str, User], api_client_for: Callable[[User | None], APIClient]
) -> None:
    make_certificate("web", make_ca_issuer())
    for role in ("viewer", "approver", "nobody"):
        client = api_client_for(role_users[role])
        assert client.get(URL).status_code == 403, role
        assert (
            client.post(URL, {"name": "x", "certificate": "web"}, format="json").status_code == 403
        )
    assert api_client_for(None).get(URL).status_code in (401, 403)
    assert not DownloadToken.objects.exists()


def test_list_queries_do_not_grow_with_tokens(operator: APIClient) -> None:
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert operator.get(URL).status_code == 200
        return len(ctx.captured_queries)

    cert = Certificate.objects.get()
    create_download_token("a", actor="t", certificate=cert)
    count()  # the first request also reads the user's roles
    few = count()
    for index in range(5):
        create_download_token(f"t{index}", actor="t", certificate=cert)
        create_download_token(f"p{index}", actor="t", name_pattern="web*")
    assert count() == few
