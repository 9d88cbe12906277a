"""The conversation page reads the newest observations and reflections of every status
a few at a time; without these indexes it sorted all of a long conversation's (5,000
observations: 3-4 ms on PostgreSQL, on every view)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0026_conversation_unobserved_tokens_bound")]

    operations = [
        migrations.AddIndex(
            model_name="observation",
            index=models.Index(fields=["conversation", "observed_at"], name="obs_conv_observed"),
        ),
        migrations.AddIndex(
            model_name="reflection",
            index=models.Index(
                fields=["conversation", "generation", "created_at"], name="refl_conv_newest"
            ),
        ),
    ]
