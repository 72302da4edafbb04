"""`otherNames` and `nameConstraints` (cert-manager v1.21): applied with `manage.py apply -f`
and through the API, issued by selfSigned and CA issuers (read back with cryptography), a
change re-issues, and an ACME issuer refuses both before anything is stored."""

from __future__ import annotations

import io
import ipaddress
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command

from issuance.models import Certificate, CertificateState, Issuer, Secret
from issuance.specs import apply_certificate_ex
from tests.factories import make_acme_issuer, make_ca_issuer, make_selfsigned_issuer
from tests.helpers import drain

MANIFEST = Path(__file__).parents[1] / "cli" / "manifests" / "name-constraints.yaml"
UPN = x509.ObjectIdentifier("1.3.6.1.4.1.311.20.2.3")


def issued(secret_name: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(Secret.objects.get(name=secret_name).tls_crt.encode())


def other_names(cert: x509.Certificate) -> list[tuple[str, bytes]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [(n.type_id.dotted_string, n.value) for n in san.get_values_for_type(x509.OtherName)]


@pytest.mark.django_db
def test_apply_issues_a_name_constrained_ca_and_an_other_name_leaf() -> None:
    out = io.StringIO()
    call_command("apply", "-f", str(MANIFEST), stdout=out)
    assert "certificate.cert-manager.io/constrained-ca created" in out.getvalue()
    drain()
    for name in ("constrained-ca", "upn-client"):
        cert = Certificate.objects.get(name=name)
        assert cert.state == CertificateState.READY, cert.conditions

    ca = issued("constrained-ca")
    ext = ca.extensions.get_extension_for_class(x509.NameConstraints)
    assert ext.critical
    assert ext.value.permitted_subtrees == [
        x509.DNSName("example.test"),
        x509.IPAddress(ipaddress.ip_network("10.0.0.0/8")),
        x509.RFC822Name("example.test"),
        x509.UniformResourceIdentifier(".example.test"),
    ]
    assert ext.value.excluded_subtrees == [x509.DNSName("bad.example.test")]

    leaf = issued("upn-client-tls")
    assert leaf.issuer == ca.subject
    # A UTF8String (tag 12), as cert-manager encodes utf8Value.
    assert other_names(leaf) == [(UPN.dotted_string, b"\x0c\x12alice@example.test")]
    san = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.RFC822Name) == ["alice@example.test"]
    # Only a CA carries name constraints.
    with pytest.raises(x509.ExtensionNotFound):
        leaf.extensions.get_extension_for_class(x509.NameConstraints)

    again = io.StringIO()
    call_command("apply", "-f", str(MANIFEST), stdout=again)
    assert again.getvalue().count("unchanged") == 4, again.getvalue()


@pytest.mark.django_db
def test_api_creates_and_a_changed_other_name_reissues(
    role_users: dict[str, User], api_client_for: Callable[[User | None], Any]
) -> None:
    make_ca_issuer("ca", secret_name="ca-key-pair")
    api = api_client_for(role_users["operator"])
    spec: dict[str, Any] = {
        "commonName": "svc",
        "otherNames": [{"oid": "1.2.3.4", "utf8Value": "first"}],
        "issuerRef": {"name": "ca"},
    }
    response = api.post("/api/v1/certificates/", {"name": "svc", "spec": spec}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["spec"]["otherNames"] == spec["otherNames"]
    drain()
    assert other_names(issued("svc")) == [("1.2.3.4", b"\x0c\x05first")]

    spec["otherNames"] = [{"oid": "1.2.3.4", "utf8Value": "second"}]
    response = api.put("/api/v1/certificates/svc/", {"spec": spec}, format="json")
    assert response.status_code == 200, response.content
    drain()
    assert Certificate.objects.get(name="svc").revision == 2
    assert other_names(issued("svc")) == [("1.2.3.4", b"\x0c\x06second")]


@pytest.mark.django_db
def test_selfsigned_ca_with_only_excluded_constraints_not_critical() -> None:
    make_selfsigned_issuer("ss")
    spec = {
        "isCA": True,
        "commonName": "root",
        "nameConstraints": {"excluded": {"ipRanges": ["192.168.1.7/16"]}},
        "issuerRef": {"name": "ss"},
    }
    apply_certificate_ex("root", spec, actor="test")
    drain()
    ext = issued("root").extensions.get_extension_for_class(x509.NameConstraints)
    assert not ext.critical
    assert ext.value.permitted_subtrees is None
    assert ext.value.excluded_subtrees == [x509.IPAddress(ipaddress.ip_network("192.168.0.0/16"))]


ACME_REFUSALS = [
    (
        {"otherNames": [{"oid": "1.2.3.4", "utf8Value": "x"}]},
        "spec.otherNames",
    ),
    (
        {"isCA": True, "nameConstraints": {"permitted": {"dnsDomains": ["example.test"]}}},
        "spec.nameConstraints",
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("extra", "field"), ACME_REFUSALS)
def test_acme_issuer_refuses_them_through_the_api(
    role_users: dict[str, User],
    api_client_for: Callable[[User | None], Any],
    extra: dict[str, Any],
    field: str,
) -> None:
    make_acme_issuer("acme")
    api = api_client_for(role_users["operator"])
    spec = {"dnsNames": ["a.example.test"], "issuerRef": {"name": "acme"}, **extra}
    response = api.post("/api/v1/certificates/", {"name": "web", "spec": spec}, format="json")
    assert response.status_code == 400, response.content
    assert "ACME orders carry only DNS names and IP addresses" in response.json()[field][0]
    assert not Certificate.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("extra", "field"), ACME_REFUSALS)
def test_acme_issuer_refuses_them_in_apply(
    tmp_path: Path, extra: dict[str, Any], field: str
) -> None:
    """The ACME Issuer in the same file: nothing of the file is applied."""
    docs = [
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Issuer",
            "metadata": {"name": "le"},
            "spec": {"acme": {"server": "https://ca.invalid/dir", "solvers": [{"http01": {}}]}},
        },
        {
            "apiVersion": "cert-manager.io/v1",
            "kind": "Certificate",
            "metadata": {"name": "web"},
            "spec": {"dnsNames": ["a.example.test"], "issuerRef": {"name": "le"}, **extra},
        },
    ]
    path = tmp_path / "acme.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    with pytest.raises(CommandError) as info:
        call_command("apply", "-f", str(path), stdout=io.StringIO())
    assert f"Certificate/web): {field}: an ACME issuer cannot issue" in str(info.value)
    assert not Certificate.objects.exists()
    assert not Issuer.objects.filter(name="le").exists()
