"""Audit events say how their hash was made. Every event written so far was chained with
plain SHA-256 (chain version 1) and keeps verifying that way; new events are keyed
(HMAC-SHA256, version 2) and name their key.

Adding a column with a constant default rewrites no row (PostgreSQL stores the default
in the catalogue), so the append-only trigger has nothing to refuse."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("governance", "0004_merge_scan_and_pseudonyms")]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="chain_version",
            field=models.PositiveSmallIntegerField(
                choices=[
                    (1, "SHA-256, unkeyed (events written before keyed chains)"),
                    (2, "HMAC-SHA256 keyed with the audit key"),
                ],
                default=1,
            ),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="auditevent",
            name="key_id",
            field=models.CharField(blank=True, default="", max_length=16),
        ),
    ]
