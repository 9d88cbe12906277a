"""Chain version 3 (events re-chained after their memory texts were scrubbed) and the
record of each re-chain, which keeps the events' old hashes so the checkpoints written
before it still verify.

Choices live in Python only: altering them changes no row, so the append-only trigger
has nothing to refuse."""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("governance", "0007_workspace_is_tenancys"),
        ("tenancy", "0001_initial"),
    ]

    operations = [
        migrations.AlterField(
            model_name="auditevent",
            name="chain_version",
            field=models.PositiveSmallIntegerField(
                choices=[
                    (1, "SHA-256, unkeyed (events written before keyed chains)"),
                    (2, "HMAC-SHA256 keyed with the audit key"),
                    (3, "HMAC-SHA256, re-chained after its texts were scrubbed"),
                ]
            ),
        ),
        migrations.CreateModel(
            name="AuditRechain",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("first_sequence", models.PositiveBigIntegerField()),
                ("last_sequence", models.PositiveBigIntegerField()),
                ("old_hashes", models.JSONField()),
                ("old_head_hash", models.CharField(max_length=64)),
                ("new_head_hash", models.CharField(max_length=64)),
                (
                    "workspace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="tenancy.workspace",
                    ),
                ),
            ],
        ),
    ]
