"""`manage.py verify_secrets`: does KEY_ENCRYPTION_KEY decrypt every secret stored in the
database? Run it after restoring a backup (docs/deploying.md, "Backup and restore") and
after rotating the key, before starting the console.

Every field named `*_ciphertext` of the console's models is read (private keys, ACME account
keys, kubeconfigs, webhook and channel secrets, second-factor keys, keystore passwords) and
decrypted in memory; nothing is written, and no secret is printed. Exit status 0 when all
decrypt, 1 (with the count per field) when any does not.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandParser
from django.db.models import Model, Q

from issuance.pki.encryption import DecryptionError, decrypt_text

SUFFIX = "_ciphertext"


def encrypted_fields() -> list[tuple[type[Model], str]]:
    """(model, field name) of every encrypted field, found by its name."""
    found = []
    for model in apps.get_app_config("issuance").get_models():
        for field in model._meta.get_fields():
            name = getattr(field, "attname", "")
            if name.endswith(SUFFIX) and getattr(field, "concrete", False):
                found.append((model, name))
    return found


class Command(BaseCommand):
    help = "Check that KEY_ENCRYPTION_KEY decrypts every stored secret (reads only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--quiet", action="store_true", help="print nothing when every secret decrypts"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        total = 0
        failed: dict[str, int] = {}
        for model, name in encrypted_fields():
            rows = model._default_manager.exclude(Q(**{name: ""})).values_list(name, flat=True)
            for ciphertext in rows.iterator():
                total += 1
                try:
                    decrypt_text(ciphertext)
                except DecryptionError:
                    label = f"{model.__name__}.{name}"
                    failed[label] = failed.get(label, 0) + 1
        if failed:
            where = ", ".join(f"{label}: {count}" for label, count in sorted(failed.items()))
            self.stderr.write(
                f"KEY_ENCRYPTION_KEY does not decrypt {sum(failed.values())} of {total} stored "
                f"secret(s) ({where}). Use the key this database was encrypted with (the one "
                "kept with the backup); nothing was changed."
            )
            raise SystemExit(1)
        if not options["quiet"]:
            self.stdout.write(f"ok: KEY_ENCRYPTION_KEY decrypts all {total} stored secret(s)")
