"""The recall index writes less per message on PostgreSQL: a message's document is a
stored column of ``memory_message`` instead of a copied row, and a conversation's rows
are found through a lexeme of each document instead of a b-tree on the conversation
(memory/search/index.py). SQLite keeps its b-tree, now made with the rest of its index
SQL."""

from django.db import migrations

from memory.search import index


def scope_index(apps, schema_editor):
    for statement in index.rebuild_sql(schema_editor.connection.vendor):
        schema_editor.execute(statement, params=None)


def sqlite_scope_index_back(apps, schema_editor):
    # Back to 0021's model index (re-added by RemoveIndex's reverse). PostgreSQL is not
    # taken back: 0021's reverse drops what either made.
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("DROP INDEX IF EXISTS searchentry_conversation", params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0021_search_index"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="searchentry", name="searchentry_conv_kind"),
        migrations.RunPython(scope_index, sqlite_scope_index_back),
    ]
