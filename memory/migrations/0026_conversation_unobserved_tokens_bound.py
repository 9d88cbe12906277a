"""An upper bound of a conversation's unobserved tokens, kept by message writes so that
most of them skip the Observer's due check. Rows from before it get NULL ("count them"),
new conversations 0 (they have no messages)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0025_idempotency_record_lifetime")]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="unobserved_tokens_bound",
            field=models.PositiveIntegerField(null=True, editable=False),
        ),
        migrations.AddField(
            model_name="conversation",
            name="unobserved_bound_version",
            field=models.PositiveIntegerField(null=True, editable=False),
        ),
        migrations.AlterField(
            model_name="conversation",
            name="unobserved_tokens_bound",
            field=models.PositiveIntegerField(null=True, default=0, editable=False),
        ),
        migrations.AlterField(
            model_name="conversation",
            name="unobserved_bound_version",
            field=models.PositiveIntegerField(null=True, default=0, editable=False),
        ),
    ]
