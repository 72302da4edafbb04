from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("issuance", "0005_kube_tokens_csrs_exports"),
    ]

    operations = [
        migrations.AddField(
            model_name="acmeserver",
            name="unreachable_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="acmeserver",
            name="unreachable_error",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.AddField(
            model_name="acmeserver",
            name="failed_requests",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="acmeserver",
            name="probes",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name="acmeserver",
            name="probe_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="acmeserver",
            name="reachable_again_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
