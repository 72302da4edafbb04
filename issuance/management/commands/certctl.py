"""`manage.py certctl status|renew|revoke|approve|deny|inspect NAME`: a cmctl for this console.

NAME is one of the console's own resources, or a mirrored cert-manager object addressed as
CLUSTER/NAMESPACE/NAME (status, renew, approve, deny; issuance/cli/mirrored.py says who
may act on those).
"""

from __future__ import annotations

import getpass
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from issuance import actions
from issuance.cli import describe, mirrored
from issuance.clusters import actions as cluster_actions
from issuance.models import REASONS, Certificate, CertificateRequest


def _actor(options: dict[str, Any]) -> str:
    return str(options.get("as_user") or f"cli:{getpass.getuser()}")


class Command(BaseCommand):
    help = "Inspect and act on certificates and requests (like cert-manager's cmctl)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        status = sub.add_parser("status", help="status of a certificate (or request)")
        status.add_argument("name")
        renew = sub.add_parser("renew", help="force renewal now, bypassing backoff")
        renew.add_argument("names", nargs="+", metavar="NAME")
        renew.add_argument("--as", dest="as_user", help="who to record as the actor")
        revoke = sub.add_parser(
            "revoke", help="revoke the issued certificate, then renew it with a new key"
        )
        revoke.add_argument("name")
        revoke.add_argument("--reason", required=True, choices=REASONS, help="RFC 5280 reason name")
        revoke.add_argument("--as", dest="as_user", help="who to record as the actor")
        for verb in ("approve", "deny"):
            p = sub.add_parser(verb, help=f"{verb} a pending CertificateRequest")
            p.add_argument("name")
            p.add_argument("--reason", default="")
            p.add_argument("--message", default="")
            p.add_argument("--as", dest="as_user", help="who to record as the actor")
        inspect = sub.add_parser(
            "inspect", help="decode the issued certificate (or a request's CSR)"
        )
        inspect.add_argument("name")

    def handle(self, *args: Any, **options: Any) -> None:
        verb = options["verb"]
        getattr(self, f"do_{verb}")(options)

    def do_status(self, options: dict[str, Any]) -> None:
        name = options["name"]
        if mirrored.is_path(name):
            kinds: tuple[str, ...] = (
                "Certificate",
                "CertificateRequest",
                "Issuer",
                "Order",
                "Challenge",
            )
            if len(name.split("/")) == 2:
                kinds = ("ClusterIssuer",)
            self.stdout.write(mirrored.status(mirrored.find(name, *kinds)))
            return
        cert = Certificate.objects.select_related("issuer").filter(name=name).first()
        if cert is not None:
            self.stdout.write(describe.certificate_status(cert))
            return
        self.stdout.write(describe.request_status(self._request(name)))

    def do_renew(self, options: dict[str, Any]) -> None:
        paths = [n for n in options["names"] if mirrored.is_path(n)]
        names = [n for n in options["names"] if not mirrored.is_path(n)]
        if paths:
            user = mirrored.acting_user(options.get("as_user"))
            rows = [mirrored.find(path, "Certificate") for path in paths]  # all found first
            for row in rows:
                queued = self._queue(lambda r=row: cluster_actions.request_renew(r, user))
                self.stdout.write(mirrored.queued_line(queued, row.cluster.name))
        if not names:
            return
        certs = list(Certificate.objects.filter(name__in=names))
        missing = sorted(set(names) - {c.name for c in certs})
        if missing:
            raise CommandError(f"certificate not found: {', '.join(missing)}")
        for cert in certs:
            actions.force_renew(cert, _actor(options))
            self.stdout.write(f"Manually triggered issuance of Certificate {cert.name}")

    def do_revoke(self, options: dict[str, Any]) -> None:
        cert = Certificate.objects.select_related("issuer").filter(name=options["name"]).first()
        if cert is None:
            raise CommandError(f"certificate not found: {options['name']}")
        try:
            revocation = actions.revoke(cert, options["reason"], _actor(options))
        except actions.ActionError as exc:
            raise CommandError(str(exc)) from None
        where = "the worker sends it to the CA" if revocation.state == "Pending" else "in the CRL"
        self.stdout.write(
            f"Revocation of Certificate {cert.name} (serial {revocation.serial}, "
            f"{revocation.reason}) {revocation.state.lower()}: {where}; renewal with a new key"
            " follows"
        )

    def do_approve(self, options: dict[str, Any]) -> None:
        self._decide(options, actions.approve, "approved")

    def do_deny(self, options: dict[str, Any]) -> None:
        self._decide(options, actions.deny, "denied")

    @staticmethod
    def _queue(queue: Any) -> Any:
        try:
            return queue()
        except actions.ActionError as exc:
            raise CommandError(str(exc)) from None

    def _decide(self, options: dict[str, Any], action: Any, word: str) -> None:
        if mirrored.is_path(options["name"]):
            row = mirrored.find(options["name"], "CertificateRequest")
            user = mirrored.acting_user(options.get("as_user"))
            decision = cluster_actions.APPROVED if word == "approved" else cluster_actions.DENIED
            queued = self._queue(
                lambda: cluster_actions.request_decision(
                    row, user, decision, options["reason"], options["message"]
                )
            )
            self.stdout.write(mirrored.queued_line(queued, row.cluster.name))
            return
        cr = self._request(options["name"])
        reason = options["reason"] or ("ApprovedByCLI" if word == "approved" else "DeniedByCLI")
        try:
            action(cr, _actor(options), reason, options["message"])
        except actions.ActionError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"CertificateRequest {cr.name} {word} ({reason})")

    def do_inspect(self, options: dict[str, Any]) -> None:
        name = options["name"]
        if mirrored.is_path(name):
            raise CommandError(
                "inspect reads the console's own stored key pairs; for a mirrored object use "
                "`certctl status CLUSTER/NAMESPACE/NAME`"
            )
        cert = Certificate.objects.filter(name=name).first()
        if cert is not None:
            self.stdout.write(describe.inspect_certificate(cert))
            return
        self.stdout.write(describe.inspect_request(self._request(name)))

    def _request(self, name: str) -> CertificateRequest:
        cr = CertificateRequest.objects.select_related("certificate").filter(name=name).first()
        if cr is None:
            raise CommandError(f"no Certificate or CertificateRequest named {name!r}")
        return cr
