"""`manage.py bootstrap_token create|list|revoke`: tokens for external CSR clients."""

from __future__ import annotations

import getpass
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from issuance.bootstrap.tokens import DEFAULT_TTL, TokenError, create_token, revoke
from issuance.models import BootstrapToken, Issuer
from issuance.timing.durations import DurationError, format_duration, parse_duration


def _actor(options: dict[str, Any]) -> str:
    return str(options.get("as_user") or f"cli:{getpass.getuser()}")


class Command(BaseCommand):
    help = "Create, list and revoke bootstrap tokens (Authorization: Bearer <id>.<secret>)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
        create = sub.add_parser("create", help="create a token; prints it once")
        create.add_argument("--ttl", default=format_duration(DEFAULT_TTL), help="e.g. 24h")
        create.add_argument("--description", default="")
        create.add_argument("--group", action="append", default=[], dest="groups")
        create.add_argument(
            "--issuer", action="append", default=[], dest="issuers", help="limit to issuer(s)"
        )
        create.add_argument("--as", dest="as_user", help="who to record as the actor")
        sub.add_parser("list", help="list tokens (never their secrets)")
        rev = sub.add_parser("revoke", help="revoke a token by its id")
        rev.add_argument("token_id")
        rev.add_argument("--as", dest="as_user", help="who to record as the actor")

    def handle(self, *args: Any, **options: Any) -> None:
        getattr(self, f"do_{options['verb']}")(options)

    def do_create(self, options: dict[str, Any]) -> None:
        try:
            ttl = parse_duration(options["ttl"])
        except DurationError as exc:
            raise CommandError(f"--ttl: {exc}") from None
        unknown = sorted(
            set(options["issuers"])
            - set(Issuer.objects.filter(name__in=options["issuers"]).values_list("name", flat=True))
        )
        if unknown:
            raise CommandError(f"--issuer: unknown issuer(s) {', '.join(unknown)}")
        try:
            token, full = create_token(
                actor=_actor(options),
                ttl=ttl,
                description=options["description"],
                groups=options["groups"],
                issuer_names=options["issuers"],
            )
        except TokenError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(
            f"Bootstrap token {token.token_id} (user {token.username}) expires "
            f"{token.expires_at.isoformat()}; it is shown only now:"
        )
        self.stdout.write(full)

    def do_list(self, options: dict[str, Any]) -> None:
        now = timezone.now()
        self.stdout.write(f"{'ID':<8}{'STATE':<10}{'EXPIRES':<27}{'ISSUERS':<20}DESCRIPTION")
        for token in BootstrapToken.objects.all():
            state = (
                "revoked"
                if token.revoked_at
                else ("expired" if token.expires_at <= now else "active")
            )
            issuers = ",".join(token.issuer_names) or "*"
            self.stdout.write(
                f"{token.token_id:<8}{state:<10}{token.expires_at.isoformat()[:25]:<27}"
                f"{issuers:<20}{token.description}"
            )

    def do_revoke(self, options: dict[str, Any]) -> None:
        try:
            token = revoke(options["token_id"], _actor(options))
        except TokenError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Bootstrap token {token.token_id} revoked")
