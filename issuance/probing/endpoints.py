"""What people do with a Certificate's endpoints: add one, remove one, "Check now". The same
functions for the console's page, the API and `certctl`, so each lands in the timeline the
same way. Validation names the field that is wrong and stores nothing."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from issuance.models import Certificate, Endpoint, EndpointProtocol
from issuance.observability import events
from issuance.probing import schedule
from issuance.specs.names import dns_name_problem
from issuance.worker.wakeup import request_steps

# Endpoints one Certificate may have: a bound on what a probe pass and its page show.
MAX_PER_CERTIFICATE = 100
# The port each protocol is usually served on, for a host given without one.
DEFAULT_PORTS = {"tls": 443, "smtp": 587, "imap": 143, "pop3": 110}


class EndpointError(ValueError):
    """Bad input: `errors` maps each field (API names) to what is wrong with it."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{field}: {problem}" for field, problem in errors.items()))
        self.errors = errors


class EndpointConflict(EndpointError):
    """The certificate already has this endpoint, or as many as it may have (API: 409)."""

    def __init__(self, message: str) -> None:
        super().__init__({"host": message})
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class EndpointInput:
    host: str
    port: int | None = None
    server_name: str = ""
    protocol: str = "tls"


def _host_problem(host: str) -> str:
    if not host:
        return "is required"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return dns_name_problem(host, allow_wildcard=False) or ""
    return ""


def validate(given: EndpointInput) -> EndpointInput:
    """The input made canonical (lower-case names, default port), or EndpointError."""
    errors: dict[str, str] = {}
    host = given.host.strip().lower().removeprefix("[").removesuffix("]")
    if problem := _host_problem(host):
        errors["host"] = problem
    protocol = given.protocol or "tls"
    if protocol not in EndpointProtocol.values:
        errors["protocol"] = "must be one of " + ", ".join(EndpointProtocol.values)
    port = given.port if given.port is not None else DEFAULT_PORTS.get(protocol, 443)
    if not 1 <= port <= 65535:
        errors["port"] = "must be between 1 and 65535"
    server_name = given.server_name.strip().lower()
    name_problem = dns_name_problem(server_name, allow_wildcard=False) if server_name else None
    if name_problem:
        errors["serverName"] = name_problem
    if errors:
        raise EndpointError(errors)
    return EndpointInput(host, port, "" if server_name == host else server_name, protocol)


def parse_address(text: str) -> EndpointInput:
    """ "host", "host:port" or "[v6]:port", as people type it in a form or on a command line."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port_text = rest.removeprefix(":")
    elif text.count(":") == 1:
        host, _, port_text = text.partition(":")
    else:
        host, port_text = text, ""
    if port_text and not port_text.isdigit():
        raise EndpointError({"port": f"must be a number, not {port_text!r}"})
    return EndpointInput(host, int(port_text) if port_text else None)


def add(cert: Certificate, given: EndpointInput, actor: str) -> Endpoint:
    """Add an endpoint, probed at the worker's next loop."""
    clean = validate(given)
    if cert.endpoints.count() >= MAX_PER_CERTIFICATE:
        raise EndpointConflict(f"a certificate has at most {MAX_PER_CERTIFICATE} endpoints")
    try:
        with transaction.atomic():
            endpoint = Endpoint.objects.create(
                certificate=cert,
                host=clean.host,
                port=clean.port or DEFAULT_PORTS[clean.protocol],
                server_name=clean.server_name,
                protocol=clean.protocol,
                created_by=actor,
                next_probe_at=timezone.now(),
            )
    except IntegrityError:
        raise EndpointConflict("this certificate already has an endpoint at this address") from None
    events.record(
        "Certificate",
        cert.name,
        "EndpointAdded",
        f"Endpoint {endpoint.address} ({endpoint.get_protocol_display()}) added",
        actor=actor,
        certificate_name=cert.name,
    )
    schedule.wake.set()
    request_steps()
    return endpoint


def remove(endpoint: Endpoint, actor: str) -> None:
    cert = endpoint.certificate
    address = endpoint.address
    endpoint.delete()
    events.record(
        "Certificate",
        cert.name,
        "EndpointRemoved",
        f"Endpoint {address} removed",
        actor=actor,
        certificate_name=cert.name,
    )


def check_now(cert: Certificate, actor: str) -> int:
    """Probe every endpoint of the certificate at the worker's next loop. How many."""
    count = schedule.make_due(Endpoint.objects.filter(certificate=cert), timezone.now())
    if count:
        events.record(
            "Certificate",
            cert.name,
            "EndpointCheckRequested",
            f"Check of {count} endpoint{'s' if count != 1 else ''} requested",
            actor=actor,
            certificate_name=cert.name,
        )
    return count
