"""A Certificate's labels through the API: `metadata.labels` on POST, PUT (replaced) and
PATCH (merged: a null value removes a label), shown in `metadata` by GET; bad labels are a
400 naming each one, with nothing stored. A label change is no new generation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from issuance.models import Certificate, Event

pytestmark = pytest.mark.django_db

URL = "/api/v1/certificates/"
SPEC = {"dnsNames": ["shop.example.test"], "issuerRef": {"name": "ss"}}


@pytest.fixture
def operator(
    world: dict[str, Any],
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], APIClient],
) -> APIClient:
    return api_client_for(role_users["operator"])


def manifest(labels: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": "shop", "labels": labels},
        "spec": SPEC,
    }


def test_create_get_list_put_and_patch(operator: APIClient) -> None:
    created = operator.post(URL, manifest({"team": "a", "env": "prod"}), format="json")
    assert created.status_code == 201, created.content
    assert created.json()["metadata"] == {
        "name": "shop",
        "labels": {"env": "prod", "team": "a"},
    }
    cert = Certificate.objects.get(name="shop")
    assert cert.labels == {"env": "prod", "team": "a"}

    shown = operator.get(f"{URL}shop/").json()
    assert shown["metadata"]["labels"] == {"env": "prod", "team": "a"}
    listed = {c["name"]: c for c in operator.get(URL).json()["results"]}
    assert listed["shop"]["metadata"]["labels"] == {"env": "prod", "team": "a"}
    assert listed["web"]["metadata"] == {"name": "web", "labels": {}}

    # The GET answer sent back is no change.
    again = operator.put(f"{URL}shop/", shown, format="json")
    assert again.status_code == 200, again.content
    cert.refresh_from_db()
    assert cert.labels == {"env": "prod", "team": "a"}
    assert not Event.objects.filter(name="shop", reason="LabelsChanged").exists()

    # PATCH merges: a null value removes a label, the others stay.
    patched = operator.patch(
        f"{URL}shop/", {"metadata": {"labels": {"env": None, "tier": "web"}}}, format="json"
    )
    assert patched.status_code == 200, patched.content
    assert patched.json()["metadata"]["labels"] == {"team": "a", "tier": "web"}
    # A PATCH without labels keeps them.
    spec_only = operator.patch(f"{URL}shop/", {"spec": {"renewBefore": "240h"}}, format="json")
    assert spec_only.status_code == 200, spec_only.content
    assert spec_only.json()["metadata"]["labels"] == {"team": "a", "tier": "web"}

    # PUT replaces them; a label change alone is no new generation.
    cert.refresh_from_db()
    generation = cert.generation
    relabelled = {**manifest({"team": "b"}), "spec": cert.spec}
    replaced = operator.put(f"{URL}shop/", relabelled, format="json")
    assert replaced.status_code == 200, replaced.content
    cert.refresh_from_db()
    assert cert.labels == {"team": "b"}
    assert replaced.json()["metadata"]["labels"] == {"team": "b"}
    assert cert.generation == generation
    # PUT without labels: none.
    bare = operator.put(f"{URL}shop/", {"spec": SPEC}, format="json")
    assert bare.status_code == 200, bare.content
    cert.refresh_from_db()
    assert cert.labels == {}
    # PATCH with labels null: none either.
    operator.patch(f"{URL}shop/", {"metadata": {"labels": {"a": "1"}}}, format="json")
    cleared = operator.patch(f"{URL}shop/", {"metadata": {"labels": None}}, format="json")
    assert cleared.status_code == 200, cleared.content
    cert.refresh_from_db()
    assert cert.labels == {}


BAD = [
    ({"bad key": "x"}, "metadata.labels[bad key]", "the name must be"),
    ({"UPPER.example/a": "x"}, "metadata.labels[UPPER.example/a]", "lower-case DNS subdomain"),
    ({"a" * 64: "x"}, f"metadata.labels[{'a' * 64}]", "1-63"),
    ({"team": "-a"}, "metadata.labels[team]", "a label value must be"),
    ({"team": "x" * 64}, "metadata.labels[team]", "a label value must be"),
    ({"team": 1}, "metadata.labels[team]", "must be a string"),
    (["team"], "metadata.labels", "must be an object"),
]


@pytest.mark.parametrize(("labels", "field", "message"), BAD)
def test_bad_labels_are_refused_naming_them_with_nothing_stored(
    operator: APIClient, labels: Any, field: str, message: str
) -> None:
    created = operator.post(URL, manifest(labels), format="json")
    assert created.status_code == 400, created.content
    assert message in " ".join(created.json()[field])
    assert not Certificate.objects.filter(name="shop").exists()

    web = Certificate.objects.get(name="web")
    web.labels = {"keep": "me"}
    web.save(update_fields=["labels"])
    for method in (operator.put, operator.patch):
        body = {"metadata": {"labels": labels}, "spec": dict(web.spec)}
        answer = method(f"{URL}web/", body, format="json")
        assert answer.status_code == 400, answer.content
        assert message in " ".join(answer.json()[field])
        web.refresh_from_db()
        assert web.labels == {"keep": "me"}


def test_bad_labels_and_a_bad_spec_are_named_together(operator: APIClient) -> None:
    body = manifest({"bad key": "x"})
    body["spec"] = {**SPEC, "issuerRef": {"name": "nowhere"}}
    answer = operator.post(URL, body, format="json")
    assert answer.status_code == 400
    assert set(answer.json()) >= {"metadata.labels[bad key]", "spec.issuerRef.name"}
    assert not Certificate.objects.filter(name="shop").exists()


def test_issuers_still_ignore_labels(operator: APIClient, admin: APIClient) -> None:
    body = {
        "metadata": {"name": "labelled", "labels": {"any thing": "!"}},
        "spec": {"selfSigned": {}},
    }
    assert admin.post("/api/v1/issuers/", body, format="json").status_code == 201


def test_the_schema_states_the_labels_shape(operator: APIClient) -> None:
    schema = operator.get("/api/schema/?format=json").json()
    read = schema["components"]["schemas"]["Certificate"]["properties"]["metadata"]
    value = read["properties"]["labels"]["additionalProperties"]
    assert value["maxLength"] == 63 and value["pattern"].startswith("^")
    write = schema["components"]["schemas"]["CertificateWriteRequest"]["properties"]["metadata"]
    assert write["properties"]["labels"]["additionalProperties"]["maxLength"] == 63
    assert "nullable" not in write["properties"]["labels"]["additionalProperties"]
    patch = schema["components"]["schemas"]["PatchedCertificateWriteRequest"]["properties"]
    assert patch["metadata"]["properties"]["labels"]["additionalProperties"]["nullable"] is True
