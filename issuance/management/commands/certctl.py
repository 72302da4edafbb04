"""`manage.py certctl status|renew|revoke|approve|deny|inspect NAME`: a cmctl for this console.

`certctl endpoints list|add|remove|check CERTIFICATE`: the servers that should serve a
certificate; `check` probes them now, from this process, and prints what each serves.

NAME is one of the console's own resources, or a mirrored cert-manager object addressed as
CLUSTER/NAMESPACE/NAME (status, renew, approve, deny; issuance/cli/mirrored.py says who
may act on those).

`certctl rules list|create|delete`: notification rules, through the same code as the
Notifications page and the API (issuance.notifications.rules).
"""

from __future__ import annotations

import getpass
from argparse import ArgumentParser
from dataclasses import replace
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from issuance.cli import describe, mirrored
from issuance.cli import endpoints as endpoint_cli
from issuance.cli.notifications import rule_table
from issuance.kubernetes.certmanager import cluster_actions
from issuance.models import REASONS, Certificate, CertificateRequest, Endpoint, NotificationRule
from issuance.notifications import rules
from issuance.operations import actions
from issuance.probing import endpoints


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
        self._add_rules(sub)
        self._add_endpoints(sub)

    @staticmethod
    def _add_endpoints(sub: Any) -> None:
        verbs = sub.add_parser(
            "endpoints", help="a certificate's endpoints: list, add, remove, check now"
        )
        ep_verbs = verbs.add_subparsers(dest="endpoints_verb", required=True, metavar="VERB")
        listing = ep_verbs.add_parser("list", help="each endpoint and its last probe")
        listing.add_argument("name", metavar="CERTIFICATE")
        add = ep_verbs.add_parser("add", help="add host[:port] (default port by protocol)")
        add.add_argument("name", metavar="CERTIFICATE")
        add.add_argument("address", metavar="HOST[:PORT]")
        add.add_argument("--server-name", default="", help="SNI name (default: the host)")
        add.add_argument("--protocol", default="tls", choices=list(endpoints.DEFAULT_PORTS))
        add.add_argument("--as", dest="as_user", help="who to record as the actor")
        remove = ep_verbs.add_parser("remove", help="remove an endpoint by its ID")
        remove.add_argument("name", metavar="CERTIFICATE")
        remove.add_argument("id", type=int)
        remove.add_argument("--as", dest="as_user", help="who to record as the actor")
        check = ep_verbs.add_parser("check", help="probe every endpoint now and show them")
        check.add_argument("name", metavar="CERTIFICATE")
        check.add_argument("--as", dest="as_user", help="who to record as the actor")

    def do_endpoints(self, options: dict[str, Any]) -> None:
        cert = Certificate.objects.select_related("issuer").filter(name=options["name"]).first()
        if cert is None:
            raise CommandError(f"certificate not found: {options['name']}")
        verb = options["endpoints_verb"]
        if verb == "add":
            try:
                given = endpoints.parse_address(options["address"])
                endpoint = endpoints.add(
                    cert,
                    replace(
                        given, server_name=options["server_name"], protocol=options["protocol"]
                    ),
                    _actor(options),
                )
            except endpoints.EndpointError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"Endpoint {endpoint.address} added (ID {endpoint.pk})")
            return
        if verb == "remove":
            found = Endpoint.objects.filter(certificate=cert, pk=options["id"]).first()
            if found is None:
                raise CommandError(f"certificate {cert.name} has no endpoint {options['id']}")
            endpoints.remove(found, _actor(options))
            self.stdout.write(f"Endpoint {found.address} removed")
            return
        if verb == "check":
            endpoints.check_now(cert, _actor(options))
            endpoint_cli.probe_all(cert)
        self.stdout.write(endpoint_cli.table(cert, cert.endpoints.order_by("host", "port")))

    @staticmethod
    def _add_rules(sub: Any) -> None:
        verbs = sub.add_parser("rules", help="list, create or delete notification rules")
        rule_verbs = verbs.add_subparsers(dest="rules_verb", required=True, metavar="RULES_VERB")
        listing = rule_verbs.add_parser("list", help="every rule (or a channel's)")
        listing.add_argument("--channel", help="only this channel's rules")
        create = rule_verbs.add_parser("create", help="send one condition to one channel")
        create.add_argument("name")
        create.add_argument("--channel", required=True, help="the channel's name")
        create.add_argument("--condition", required=True, choices=rules.CONDITIONS)
        create.add_argument(
            "--threshold", type=int, default=0, help="days (expiring), minutes (approval_waiting)"
        )
        create.add_argument("--name-pattern", default="", help="only names matching, e.g. web-*")
        create.add_argument("--issuer-pattern", default="", help="only issuers matching")
        create.add_argument("--disabled", action="store_true", help="create it switched off")
        create.add_argument("--as", dest="as_user", help="who to record as the actor")
        delete = rule_verbs.add_parser("delete", help="delete rules")
        delete.add_argument("names", nargs="+", metavar="NAME")
        delete.add_argument("--as", dest="as_user", help="who to record as the actor")

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

    def do_rules(self, options: dict[str, Any]) -> None:
        verb = options["rules_verb"]
        if verb == "list":
            found = NotificationRule.objects.select_related("channel").order_by("name")
            if options["channel"]:
                found = found.filter(channel__name=options["channel"])
            self.stdout.write(rule_table(found))
        elif verb == "create":
            changes = {
                "channel": options["channel"],
                "condition": options["condition"],
                "threshold": options["threshold"],
                "name_pattern": options["name_pattern"],
                "issuer_pattern": options["issuer_pattern"],
                "enabled": not options["disabled"],
            }
            try:
                rule = rules.create(options["name"], changes, _actor(options))
            except rules.RuleError as exc:
                # Named as the options are (the name is the argument itself).
                raise CommandError(
                    "; ".join(
                        f"{'NAME' if k == 'name' else '--' + k.replace('_', '-')}: {v}"
                        for k, v in exc.errors.items()
                    )
                ) from None
            self.stdout.write(f"notificationrule.issuance.console/{rule.name} created")
        else:
            names = options["names"]
            doomed = list(NotificationRule.objects.filter(name__in=names))
            missing = sorted(set(names) - {r.name for r in doomed})
            if missing:
                raise CommandError(f"notification rule not found: {', '.join(missing)}")
            for rule in doomed:
                rules.delete(rule, _actor(options))
                self.stdout.write(f"notificationrule.issuance.console/{rule.name} deleted")

    def _request(self, name: str) -> CertificateRequest:
        cr = CertificateRequest.objects.select_related("certificate").filter(name=name).first()
        if cr is None:
            raise CommandError(f"no Certificate or CertificateRequest named {name!r}")
        return cr
