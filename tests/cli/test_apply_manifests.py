"""`manage.py apply -f` with cert-manager's documented forms (tests/cli/manifests/, written for
these tests with the field names of cert-manager's v1.21 API reference): several objects in
one file in any order, one per file, all or nothing, re-applied as a no-op; what
`kubectl get -o yaml` adds is ignored with a note; ambient-identity solvers and HTTP-01
ingress/gatewayHTTPRoute settings are stored and reported as not usable here."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from django.core.management import CommandError, call_command

from issuance.acme.solvers import usability
from issuance.acme.solvers.webhook import MappingError, WebhookSolver, solver_urls
from issuance.controllers import issuers as issuer_controller
from issuance.models import (
    Certificate,
    CertificateRequest,
    CertificateState,
    Event,
    Issuer,
    Secret,
)
from tests.helpers import drain

MANIFESTS = Path(__file__).parent / "manifests"
BOOTSTRAP = "ca-bootstrap.yaml"


def documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((MANIFESTS / name).read_text()) if d]


def write(tmp_path: Path, docs: list[dict[str, Any]], name: str = "file.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def run(path: Path) -> tuple[list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("apply", "-f", str(path), stdout=out, stderr=err)
    return out.getvalue().splitlines(), err.getvalue()


def assert_ca_signed_leaf() -> None:
    """The leaf is Ready, signed by the bootstrapped CA, whose certificate came from the
    selfSigned ClusterIssuer; checked with cryptography."""
    leaf_cert = Certificate.objects.get(name="bootstrap-leaf")
    assert leaf_cert.state == CertificateState.READY, leaf_cert.conditions
    ca_issuer = Issuer.objects.get(name="my-ca-issuer")
    assert ca_issuer.condition_is("Ready"), ca_issuer.conditions
    root = x509.load_pem_x509_certificate(Secret.objects.get(name="root-secret").tls_crt.encode())
    leaf = x509.load_pem_x509_certificate(
        Secret.objects.get(name="bootstrap-leaf-tls").tls_crt.encode()
    )
    assert root.subject == root.issuer  # self-signed
    assert root.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert leaf.issuer == root.subject
    root_key = root.public_key()
    assert isinstance(root_key, ec.EllipticCurvePublicKey)
    assert leaf.signature_hash_algorithm is not None
    root_key.verify(
        leaf.signature, leaf.tbs_certificate_bytes, ec.ECDSA(leaf.signature_hash_algorithm)
    )
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["leaf.example.test"]


BOOTSTRAP_RESULT = [
    "issuer.cert-manager.io/my-ca-issuer created",
    "clusterissuer.cert-manager.io/selfsigned-issuer created",
    "certificate.cert-manager.io/bootstrap-leaf created",
    "certificate.cert-manager.io/my-selfsigned-ca created",
]


@pytest.mark.django_db
@pytest.mark.parametrize("order", ["as written", "reversed"])
def test_ca_bootstrap_in_one_file_issues_a_ca_signed_certificate(
    tmp_path: Path, order: str
) -> None:
    docs = documents(BOOTSTRAP)
    if order == "reversed":
        docs.reverse()
    out, err = run(write(tmp_path, docs))
    # Issuers before the Certificates that refer to them, each group in file order.
    assert sorted(out) == sorted(BOOTSTRAP_RESULT)
    assert out.index("issuer.cert-manager.io/my-ca-issuer created") < out.index(
        "certificate.cert-manager.io/bootstrap-leaf created"
    )
    assert "root-secret" not in err  # the CA Issuer's missing Secret is no problem
    assert not Secret.objects.filter(name="root-secret").exists()
    assert drain() > 0
    assert_ca_signed_leaf()


@pytest.mark.django_db
def test_ca_bootstrap_one_document_per_file(tmp_path: Path) -> None:
    """The CA Issuer first, before the Secret it reads exists (Ready=False until it does),
    and the leaf before the CA is issued."""
    by_name = {d["metadata"]["name"]: d for d in documents(BOOTSTRAP)}
    for name in ("my-ca-issuer", "bootstrap-leaf", "selfsigned-issuer", "my-selfsigned-ca"):
        out, _ = run(write(tmp_path, [by_name[name]], f"{name}.yaml"))
        assert len(out) == 1 and out[0].endswith(f"/{name} created"), out
        if name == "my-ca-issuer":
            drain()
            ready = Issuer.objects.get(name=name).get_condition("Ready")
            assert ready and ready["status"] == "False", ready
            assert ready["reason"] == "ErrGetKeyPair" and "root-secret" in ready["message"]
    drain()
    assert_ca_signed_leaf()


@pytest.mark.django_db
def test_reapplying_the_file_is_unchanged_and_changes_nothing(tmp_path: Path) -> None:
    path = write(tmp_path, documents(BOOTSTRAP))
    run(path)
    drain()

    def snapshot() -> dict[str, Any]:
        return {
            "events": Event.objects.count(),
            "requests": CertificateRequest.objects.count(),
            "issuers": sorted(Issuer.objects.values_list("name", "generation", "updated_at")),
            "certificates": sorted(
                Certificate.objects.values_list("name", "generation", "revision")
            ),
            "secrets": sorted(Secret.objects.values_list("name", "updated_at")),
        }

    before = snapshot()
    out, _ = run(path)
    assert sorted(out) == sorted(line.replace("created", "unchanged") for line in BOOTSTRAP_RESULT)
    drain()
    assert snapshot() == before


@pytest.mark.django_db
def test_a_bad_third_document_applies_nothing(tmp_path: Path) -> None:
    docs = documents(BOOTSTRAP)
    assert docs[2]["kind"] == "ClusterIssuer"
    docs[2]["spec"]["selfSigned"] = {"maxDuration": "soon"}
    with pytest.raises(CommandError) as info:
        run(write(tmp_path, docs))
    message = str(info.value)
    assert message.startswith("nothing applied")
    assert "document 3 (ClusterIssuer/selfsigned-issuer): spec.selfSigned.maxDuration" in message
    assert "document 1" not in message and "document 2" not in message
    assert Issuer.objects.count() == 0
    assert Certificate.objects.count() == 0
    assert Secret.objects.count() == 0
    assert Event.objects.count() == 0


KUBECTL_NOTES = {
    "document 1 (Issuer/copied-selfsigned)": [
        "metadata.uid ignored",
        "metadata.resourceVersion ignored",
        "metadata.creationTimestamp ignored",
        "metadata.generation ignored",
        "metadata.annotations[kubectl.kubernetes.io/last-applied-configuration] ignored",
        "status ignored",
    ],
    "document 2 (Certificate/copied-web)": [
        "metadata.ownerReferences ignored",
        "metadata.managedFields ignored",
        "metadata.generation ignored",
        "status ignored",
    ],
}


@pytest.mark.django_db
def test_kubectl_get_output_applies_with_notes(tmp_path: Path) -> None:
    path = MANIFESTS / "kubectl-get.yaml"
    out, err = run(path)
    assert out == [
        "issuer.cert-manager.io/copied-selfsigned created",
        "certificate.cert-manager.io/copied-web created",
    ]
    for label, notes in KUBECTL_NOTES.items():
        for note in notes:
            assert f"note: {label}: {note}" in err, (note, err)
    assert Issuer.objects.get(name="copied-selfsigned").spec == {"selfSigned": {}}
    cert = Certificate.objects.get(name="copied-web")
    assert cert.generation == 1 and cert.revision is None  # theirs, not kept
    assert "status" not in cert.spec
    out, _ = run(path)
    assert out == [
        "issuer.cert-manager.io/copied-selfsigned unchanged",
        "certificate.cert-manager.io/copied-web unchanged",
    ]


@pytest.mark.django_db
def test_ambient_identity_and_webhook_forms_are_stored_and_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ACME_WEBHOOK_SOLVERS", raising=False)
    out, _ = run(MANIFESTS / "dns01-ambient-forms.yaml")
    assert [line.rsplit(" ", 1)[1] for line in out] == ["created"] * 4
    solver = "spec.acme.solvers[0].dns01"
    expected = {
        "azure-managed-identity": (
            f"{solver}.azureDNS.clientSecretSecretRef: managed or workload identity",
            "Azure's instance metadata endpoint",
        ),
        "azure-workload-identity": (
            f"{solver}.azureDNS.clientSecretSecretRef: managed or workload identity",
            "service principal",
        ),
        "clouddns-ambient": (
            f"{solver}.cloudDNS.serviceAccountSecretRef: ambient credentials",
            "Google's metadata server",
        ),
        "webhook-solver": (
            f"{solver}.webhook: no URL for webhook acme.mycompany.example/my-custom-solver",
            "ACME_WEBHOOK_SOLVERS",
        ),
    }
    for name, (start, why) in expected.items():
        issuer = Issuer.objects.get(name=name)
        issuer_controller.reconcile(issuer)
        issuer.refresh_from_db()
        ready = issuer.get_condition("Ready")
        assert ready and ready["status"] == "False" and ready["reason"] == "SolverNotUsable"
        assert ready["message"].startswith(start), ready["message"]
        assert why in ready["message"]
    # Every field kept as written.
    azure = Issuer.objects.get(name="azure-managed-identity").spec["acme"]["solvers"][0]
    assert azure["dns01"]["azureDNS"]["managedIdentity"] == {
        "clientID": "00000000-0000-0000-0000-000000000002"
    }
    assert azure["dns01"]["azureDNS"]["hostedZoneName"] == "example.test"
    assert Issuer.objects.get(name="clouddns-ambient").spec["acme"]["solvers"][0]["dns01"] == {
        "cloudDNS": {"project": "my-project"}
    }
    webhook = Issuer.objects.get(name="webhook-solver").spec["acme"]["solvers"][0]["dns01"]
    assert webhook["webhook"]["config"]["apiKeySecretRef"] == {
        "name": "solver-credentials",
        "key": "api-key",
    }


@pytest.mark.django_db
def test_http01_ingress_and_gateway_forms_are_stored_and_reported() -> None:
    out, _ = run(MANIFESTS / "http01-cluster-forms.yaml")
    assert [line.rsplit(" ", 1)[1] for line in out] == ["created"] * 2
    expected = {
        "letsencrypt-nginx": "spec.acme.solvers[0].http01.ingress: cert-manager routes "
        "HTTP-01 through an Ingress",
        "gateway-route": "spec.acme.solvers[0].http01.gatewayHTTPRoute: cert-manager routes "
        "HTTP-01 through a Gateway API HTTPRoute",
    }
    for name, start in expected.items():
        issuer = Issuer.objects.get(name=name)
        issuer_controller.reconcile(issuer)
        issuer.refresh_from_db()
        ready = issuer.get_condition("Ready")
        assert ready and ready["status"] == "False" and ready["reason"] == "SolverNotUsable"
        assert ready["message"].startswith(start), ready["message"]
        assert "manage.py http01_solver" in ready["message"]
    # Every field kept as written.
    nginx = Issuer.objects.get(name="letsencrypt-nginx").spec["acme"]["solvers"][0]
    assert nginx["http01"]["ingress"] == {
        "ingressClassName": "nginx",
        "podTemplate": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}},
    }
    route = Issuer.objects.get(name="gateway-route").spec["acme"]["solvers"][0]
    assert route["http01"]["gatewayHTTPRoute"]["parentRefs"] == [
        {"name": "gateway", "namespace": "gateway-system", "kind": "Gateway"}
    ]
    # Re-applied unchanged: a no-op, the settings compared as stored.
    again, _ = run(MANIFESTS / "http01-cluster-forms.yaml")
    assert [line.rsplit(" ", 1)[1] for line in again] == ["unchanged"] * 2, again


def test_http01_without_cluster_settings_is_usable() -> None:
    usable: list[dict[str, Any]] = [{}, {"ingress": {}}, {"gatewayHTTPRoute": None}]
    for http01 in usable:
        assert usability.unusable_solver([{"http01": http01}]) is None
    problem = usability.unusable_solver(
        [{"http01": {}}, {"http01": {"ingress": {"class": "nginx"}}}]
    )
    assert problem is not None and problem.startswith("spec.acme.solvers[1].http01.ingress: ")


def test_the_webhook_mapping_makes_the_cert_manager_form_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    block = {
        "groupName": "acme.mycompany.example",
        "solverName": "my-custom-solver",
        "config": {"zone": "example.test"},
    }
    solvers = [{"dns01": {"webhook": block}}]
    monkeypatch.setenv("ACME_WEBHOOK_SOLVERS", "other.example/x=http://127.0.0.1:1/x")
    assert "no URL for webhook" in str(usability.unusable_solver(solvers))
    monkeypatch.setenv(
        "ACME_WEBHOOK_SOLVERS",
        " other.example/x=http://127.0.0.1:1/x ; "
        "acme.mycompany.example/my-custom-solver=https://solver.example.test/hook ;",
    )
    assert usability.unusable_solver(solvers) is None
    solver = WebhookSolver(block)  # type: ignore[arg-type]
    assert solver.url == "https://solver.example.test/hook"
    assert solver.extra == block
    # A url in the block itself wins over the mapping.
    assert WebhookSolver({**block, "url": "http://127.0.0.1:2/own"}).url == (  # type: ignore[typeddict-item]
        "http://127.0.0.1:2/own"
    )
    with pytest.raises(MappingError, match=r"entry 1 \('acme/x=ftp://a'\)"):
        solver_urls("acme/x=ftp://a")
    monkeypatch.setenv("ACME_WEBHOOK_SOLVERS", "nonsense")
    problem = usability.unusable_solver(solvers)
    assert problem is not None and "ACME_WEBHOOK_SOLVERS, entry 1 ('nonsense')" in problem


@pytest.mark.parametrize(
    ("dns01", "start"),
    [
        ({"cloudDNS": {"project": "p"}}, "dns01.cloudDNS.serviceAccountSecretRef: ambient"),
        (
            {"azureDNS": {"subscriptionID": "s", "resourceGroupName": "g"}},
            "dns01.azureDNS.clientSecretSecretRef: managed or workload identity",
        ),
        ({"webhook": {"groupName": "g.example", "solverName": "s"}}, "dns01.webhook: no URL"),
    ],
)
def test_the_dns_test_says_why_a_stored_form_cannot_run(
    dns01: dict[str, Any], start: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issuer's DNS test (preflight) answers with the reason at once, asking no one."""
    from issuance.acme.solvers import preflight

    monkeypatch.delenv("ACME_WEBHOOK_SOLVERS", raising=False)
    result = preflight.run({"dns01": dns01}, "www.example.test")
    assert not result.ok
    assert result.message.startswith(start), result.message
    assert result.seconds < 1
