from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("issuance", "0009_ari_renewal_windows"),
    ]

    operations = [
        migrations.AddField(
            model_name="order",
            name="server",
            field=models.CharField(blank=True, default="", max_length=1024),
        ),
        migrations.AddField(
            model_name="order",
            name="server_index",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="order",
            name="server_refusals",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="issuer",
            name="acme_fallback_accounts",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
