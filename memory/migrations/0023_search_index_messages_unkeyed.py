"""A message's row of the recall index is no longer keyed by its (random) id: the
unique key on ``(source_id, kind)`` covers notes and pins only, and SQLite finds a
message's row by its conversation and seq (memory/search/index.py). The random-key
b-tree cost SQLite's ingest about a tenth of its rate (docs/benchmarks.md, "Recall").

SQLite rebuilds ``memory_searchentry`` to change the constraint, so the triggers and
the FTS5 table go first and come back after, the FTS5 index re-read from the kept rows.
"""

from django.db import migrations, models

from memory.search import index


def drop_what_refers(apps, schema_editor):
    for statement in index.rekey_drop_sql(schema_editor.connection.vendor):
        schema_editor.execute(statement, params=None)


def create_what_refers(apps, schema_editor):
    for statement in index.rekey_create_sql(schema_editor.connection.vendor):
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0022_search_index_lighter"),
    ]

    operations = [
        migrations.RunPython(drop_what_refers, create_what_refers),
        migrations.RemoveConstraint(model_name="searchentry", name="searchentry_source"),
        migrations.AddConstraint(
            model_name="searchentry",
            constraint=models.UniqueConstraint(
                condition=models.Q(("kind", "message"), _negated=True),
                fields=("source_id", "kind"),
                name="searchentry_source",
            ),
        ),
        migrations.RunPython(create_what_refers, drop_what_refers),
    ]
