"""ARI (RFC 9773) polling state on the Certificate: the CA's window, last and next check."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("issuance", "0008_revocation"),
    ]

    operations = [
        migrations.AddField(
            model_name="certificate",
            name="ari_window_start",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="certificate",
            name="ari_window_end",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="certificate",
            name="ari_checked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="certificate",
            name="ari_next_check",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
