"""ApiToken: per-user API tokens stored as SHA-256 digests; DRF's tokens moved into it.

Existing `rest_framework.authtoken` keys keep working: each becomes an ApiToken named
"migrated" whose digest is SHA-256 of the key. The authtoken table is read with plain SQL
(the app is no longer installed, so its model is not in the migration state) and left in
place, untouched: nothing reads it any more; `DROP TABLE authtoken_token` once a rollback
to the old code is no longer wanted.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models
from django.utils.dateparse import parse_datetime


def _aware(value: object) -> datetime:
    """The raw column as an aware datetime: SQLite gives text or naive UTC values."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    if not isinstance(moment, datetime):
        return django.utils.timezone.now()
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def copy_drf_tokens(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if "authtoken_token" not in connection.introspection.table_names(cursor):
            return
        cursor.execute('SELECT "key", "user_id", "created" FROM "authtoken_token"')
        rows = cursor.fetchall()
    ApiToken = apps.get_model("issuance", "ApiToken")
    ApiToken.objects.bulk_create(
        [
            ApiToken(
                user_id=user_id,
                name="migrated",
                prefix=key[:8],
                digest=hashlib.sha256(key.encode()).hexdigest(),
                created_at=_aware(created),
            )
            for key, user_id, created in rows
        ],
        ignore_conflicts=True,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("issuance", "0012_console_policy_audit"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100)),
                ("prefix", models.CharField(max_length=16)),
                ("digest", models.CharField(max_length=64, unique=True)),
                (
                    "created_at",
                    models.DateTimeField(default=django.utils.timezone.now, editable=False),
                ),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="api_tokens",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
                "indexes": [models.Index(fields=["user", "created_at"], name="apitoken_user")],
            },
        ),
        migrations.RunPython(copy_drf_tokens, migrations.RunPython.noop),
    ]
