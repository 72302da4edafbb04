"""Files from the browser: a certificate's PEM files, its private key and a PKCS#12 bundle,
a CA issuer's certificate and an ACME issuer's chain.

Public files (the certificate, its chain, the full chain; a CA certificate; an issuer's
chain) are GET links for whoever reads the certificate or the issuer. The private key and
the PKCS#12 bundle follow the API's rule for key pairs (`certificate` / `read-key` in
issuance.access.permissions: admin), are POSTs (CSRF-checked, never cached, never in a
link that a proxy or the history keeps), and every one is in the audit log as the API's
`SecretRead`. The PKCS#12 password is typed by the user in the form; it is not stored,
logged or put in an event (`sensitive_post_parameters` keeps it out of error reports).
"""

from __future__ import annotations

from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.serialization import pkcs12
from django import forms
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.web.access import permission_required, render_page
from issuance.issuers import ca as ca_issuer
from issuance.models import Certificate, Issuer, Secret
from issuance.observability import events
from issuance.pki.keys import load_stored_private_key
from issuance.pki.x509 import split_pem_chain

PEM = "application/x-pem-file"
PKCS12 = "application/x-pkcs12"
PASSWORD_MIN = 8
PASSWORD_MAX = 256
# The public files of a certificate: the name in the URL -> (what it holds, file suffix).
PUBLIC_FILES = {
    "cert.pem": ("the certificate", ".pem"),
    "chain.pem": ("the chain (the issuing CA certificates)", "-chain.pem"),
    "fullchain.pem": ("the certificate and its chain", "-fullchain.pem"),
}


class Pkcs12Form(forms.Form):
    password = forms.CharField(
        min_length=PASSWORD_MIN,
        max_length=PASSWORD_MAX,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
        help_text=f"protects the bundle; at least {PASSWORD_MIN} characters, not stored",
    )
    confirm = forms.CharField(
        label="Password again",
        max_length=PASSWORD_MAX,
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        if data.get("password") and data.get("confirm") != data.get("password"):
            self.add_error("confirm", "does not match the password")
        return data


def _attachment(body: bytes, mime: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=mime)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _issued(name: str) -> tuple[Certificate, Secret]:
    cert = get_object_or_404(Certificate.objects.defer("spec"), name=name)
    secret = Secret.objects.filter(name=cert.secret_name).first()
    if secret is None or not secret.tls_crt:
        raise Http404(f"certificate {name} is not issued yet")
    return cert, secret


def chain_of(secret: Secret) -> list[str]:
    """The issuing CA certificates: what tls.crt holds after the leaf, else ca.crt (never
    the leaf itself: a self-signed certificate is its own ca.crt and has no chain)."""
    blocks = split_pem_chain(secret.tls_crt)
    chain = blocks[1:] or split_pem_chain(secret.ca_crt)
    return [block for block in chain if blocks and block != blocks[0]]


def has_files(cert: Certificate) -> bool:
    """Whether the certificate page offers the Download menu (a stored certificate)."""
    return Secret.objects.filter(name=cert.secret_name).exclude(tls_crt="").exists()


@require_GET
@permission_required("certificate", "read")
def certificate_file(request: HttpRequest, name: str, filename: str) -> HttpResponse:
    if filename not in PUBLIC_FILES:
        raise Http404(f"no file {filename}")
    cert, secret = _issued(name)
    blocks = split_pem_chain(secret.tls_crt)
    if filename == "cert.pem":
        body = blocks[0]
    elif filename == "chain.pem":
        chain = chain_of(secret)
        if not chain:
            raise Http404(f"certificate {name} has no chain")
        body = "".join(chain)
    else:
        body = "".join([blocks[0], *chain_of(secret)])
    return _attachment(body.encode(), PEM, f"{cert.name}{PUBLIC_FILES[filename][1]}")


def _key_read(request: HttpRequest, cert: Certificate, secret: Secret, what: str) -> None:
    """The audit log's entry for a key leaving through the console (as the API's)."""
    events.record(
        "Certificate",
        cert.name,
        "SecretRead",
        f"Private key of secret {secret.name!r} downloaded from the console as {what}",
        actor=request.user.get_username(),
        certificate_name=cert.name,
    )


@never_cache
@require_GET
@permission_required("certificate", "read-key")
def key_files(request: HttpRequest, name: str) -> HttpResponse:
    """The page with the private key and PKCS#12 forms (admin)."""
    cert, _ = _issued(name)
    return _key_page(request, cert, Pkcs12Form())


def _key_page(
    request: HttpRequest, cert: Certificate, form: Pkcs12Form, status: int = 200
) -> HttpResponse:
    return render_page(
        request,
        "console/certificates/key_files.html",
        {"cert": cert, "form": form},
        live_groups=f"certificate:{cert.name}",
        status=status,
    )


@never_cache
@require_POST
@permission_required("certificate", "read-key")
def key_pem(request: HttpRequest, name: str) -> HttpResponse:
    cert, secret = _issued(name)
    body = secret.tls_key.encode()
    _key_read(request, cert, secret, f"{cert.name}.key")
    return _attachment(body, PEM, f"{cert.name}.key")


@never_cache
@sensitive_post_parameters("password", "confirm")
@require_http_methods(["POST"])
@permission_required("certificate", "read-key")
def key_pkcs12(request: HttpRequest, name: str) -> HttpResponse:
    cert, secret = _issued(name)
    form = Pkcs12Form(request.POST)
    if not form.is_valid():
        return _key_page(request, cert, form, status=400)
    blocks = split_pem_chain(secret.tls_crt)
    leaf = x509.load_pem_x509_certificate(blocks[0].encode())
    cas = [x509.load_pem_x509_certificate(b.encode()) for b in chain_of(secret)]
    key = load_stored_private_key(secret.tls_key)
    # PBES2 with AES-256 and a SHA-256 MAC (cert-manager's Modern2023 profile).
    encryption = (
        serialization.PrivateFormat.PKCS12.encryption_builder()
        .kdf_rounds(50000)
        .key_cert_algorithm(pkcs12.PBES.PBESv2SHA256AndAES256CBC)
        .hmac_hash(hashes.SHA256())
        .build(form.cleaned_data["password"].encode())
    )
    body = pkcs12.serialize_key_and_certificates(
        cert.name.encode(),
        key,  # type: ignore[arg-type]  # never an ML-DSA key: we only make RSA/EC/Ed25519
        leaf,
        cas or None,
        encryption,
    )
    _key_read(request, cert, secret, f"{cert.name}.p12")
    return _attachment(body, PKCS12, f"{cert.name}.p12")


@require_GET
@permission_required("issuer", "read")
def issuer_file(request: HttpRequest, name: str, filename: str) -> HttpResponse:
    """`ca.pem`: a CA issuer's certificate; `chain.pem`: the chain an ACME issuer's CA sent
    with the newest certificate it issued here (the CA's own certificates, no leaf)."""
    issuer = get_object_or_404(Issuer.objects.defer("acme_account_key_ciphertext"), name=name)
    if filename == "ca.pem" and issuer.kind == "ca":
        secret = Secret.objects.filter(name=ca_issuer.secret_name(issuer)).first()
        blocks = split_pem_chain(secret.tls_crt) if secret else []
        if not blocks:
            raise Http404(f"issuer {name} has no CA certificate yet")
        return _attachment("".join(blocks).encode(), PEM, f"{issuer.name}-ca.pem")
    if filename == "chain.pem" and issuer.kind == "acme":
        chain = issuer_chain(issuer)
        if not chain:
            raise Http404(f"issuer {name} has not issued a certificate yet")
        return _attachment("".join(chain).encode(), PEM, f"{issuer.name}-chain.pem")
    raise Http404(f"issuer {name} offers no {filename}")


def issuer_chain(issuer: Issuer) -> list[str]:
    """The chain of the newest stored certificate issued by `issuer` (empty: none yet)."""
    secrets = Secret.objects.filter(certificate__issuer=issuer).exclude(tls_crt="")
    newest = secrets.order_by("-updated_at", "-id").only("tls_crt", "ca_crt").first()
    return chain_of(newest) if newest else []
