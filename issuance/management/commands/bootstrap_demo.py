"""`manage.py bootstrap_demo`: the admin user and demo data `make run` starts with.

Idempotent: runs on every `make run`; creates only what is missing. The admin password
is printed once, when the user is created, and never stored in clear anywhere.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand
from django.db import transaction

from issuance.access.roles import ADMIN
from issuance.models import Certificate, Issuer

DEMO_ISSUERS: list[tuple[str, dict[str, Any]]] = [
    ("demo-selfsigned", {"selfSigned": {}}),
    ("demo-ca", {"ca": {"generate": True, "commonName": "Issuance Console Demo CA"}}),
]
DEMO_CERTIFICATES: list[tuple[str, dict[str, Any]]] = [
    (
        "demo-web",
        {
            "secretName": "demo-web-tls",
            "dnsNames": ["demo.localhost", "www.demo.localhost"],
            "duration": "2160h",
            "issuerRef": {"name": "demo-ca", "kind": "Issuer"},
            "privateKey": {"algorithm": "ECDSA", "size": 256},
        },
    ),
]


class Command(BaseCommand):
    help = "Create the admin user (printing its password once) and demo issuers/certificate."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--no-demo", action="store_true", help="only the admin user")

    def handle(self, *args: Any, **options: Any) -> None:
        self._admin(options["username"])
        if not options["no_demo"]:
            self._demo()

    def _admin(self, username: str) -> None:
        if User.objects.filter(username=username).exists():
            self.stdout.write(
                f"Admin user {username!r} exists (its password was printed when created)."
            )
            return
        password = secrets.token_urlsafe(12)
        with transaction.atomic():
            user = User.objects.create_superuser(username=username, email="", password=password)
            user.groups.add(Group.objects.get(name=ADMIN))
        self.stdout.write(
            self.style.SUCCESS(
                f"Created admin user {username!r} with password: {password}\n"
                "  (shown once; at the first sign-in the console sets up its second factor, "
                "an authenticator app's code; change the password under Security, or with "
                f"`manage.py changepassword {username}`)"
            )
        )

    def _demo(self) -> None:
        from issuance.specs.certificate import apply_certificate
        from issuance.specs.issuer import apply_issuer

        for name, spec in DEMO_ISSUERS:
            if not Issuer.objects.filter(name=name).exists():
                apply_issuer(name, spec, actor="bootstrap")
                self.stdout.write(f"Created demo issuer {name}")
        for name, spec in DEMO_CERTIFICATES:
            if not Certificate.objects.filter(name=name).exists():
                apply_certificate(name, spec, actor="bootstrap")
                self.stdout.write(f"Created demo certificate {name}")
