"""Indexes for the audit log's filters (console/web/audit.py): actor and reason, newest first.

On PostgreSQL they are built CONCURRENTLY: the timeline is the most written table, and a
plain CREATE INDEX would hold up every worker's inserts until it finished."""

from __future__ import annotations

from typing import Any

from django.db import migrations, models


class AddIndexConcurrentlyOnPostgres(migrations.AddIndex):
    def database_forwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        model = to_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.add_index(model, self.index, concurrently=True)
        else:
            super().database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(
        self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any
    ) -> None:
        model = from_state.apps.get_model(app_label, self.model_name)
        if not self.allow_migrate_model(schema_editor.connection.alias, model):
            return
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.remove_index(model, self.index, concurrently=True)
        else:
            super().database_backwards(app_label, schema_editor, from_state, to_state)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run inside a transaction

    dependencies = [
        ("issuance", "0011_console_certs"),
    ]

    operations = [
        AddIndexConcurrentlyOnPostgres(
            model_name="event",
            index=models.Index(fields=["actor", "created_at"], name="event_actor"),
        ),
        AddIndexConcurrentlyOnPostgres(
            model_name="event",
            index=models.Index(fields=["reason", "created_at"], name="event_reason"),
        ),
    ]
