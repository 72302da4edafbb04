"""`manage.py oidc_link USERNAME SUB`: let an existing console account sign in through the
OpenID Provider (docs/sso.md). Without a link, a provider user whose username is taken by a
console account is refused, so nobody takes over a local account by choosing its name."""

from __future__ import annotations

import getpass
from argparse import ArgumentParser
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from issuance.access import oidc


class Command(BaseCommand):
    help = "Link a console user to an account at the OpenID Provider (its `sub` claim)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("sub", help="the provider account's `sub` claim")
        parser.add_argument(
            "--issuer", default="", help="the provider's issuer URL (default: OIDC_ISSUER_URL)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        issuer = (options["issuer"] or settings.OIDC_ISSUER_URL).strip().rstrip("/")
        if not issuer:
            raise CommandError("set OIDC_ISSUER_URL or pass --issuer")
        try:
            oidc.link(options["username"], issuer, options["sub"], actor=f"cli:{getpass.getuser()}")
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{options['username']} signs in as sub {options['sub']} at {issuer}")
