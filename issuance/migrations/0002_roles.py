from __future__ import annotations

from typing import Any

from django.db import migrations

ROLES = ("viewer", "operator", "approver", "admin")


def create_roles(apps: Any, schema_editor: Any) -> None:
    Group = apps.get_model("auth", "Group")
    for name in ROLES:
        Group.objects.get_or_create(name=name)


def drop_roles(apps: Any, schema_editor: Any) -> None:
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("issuance", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
    ]
    operations = [migrations.RunPython(create_roles, drop_roles)]
