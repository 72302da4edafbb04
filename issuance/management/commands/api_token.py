"""`manage.py api_token USERNAME [--name NAME]`: a new API token for a user, printed once.

Prints only the token, so `TOKEN=$(python manage.py api_token alice)` works. Tokens are
listed and revoked on the user's API tokens page (the console, /account/tokens/).
"""

from __future__ import annotations

import getpass
from argparse import ArgumentParser
from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from issuance.access.apitokens import TokenError, create_token


class Command(BaseCommand):
    help = "Create an API token (Authorization: Token <token>) for a user; prints it once."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="manage.py api_token", help="what uses it")

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user named {options['username']!r}")
        try:
            _, text = create_token(user, options["name"], actor=f"cli:{getpass.getuser()}")
        except TokenError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(text)
