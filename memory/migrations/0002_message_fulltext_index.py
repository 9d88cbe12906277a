"""The full-text index behind message search, on PostgreSQL only (SQLite searches with
LIKE and has no GIN indexes)."""

from __future__ import annotations

from django.db import migrations

CREATE = (
    "CREATE INDEX IF NOT EXISTS message_content_fts ON memory_message "
    "USING gin (to_tsvector('english'::regconfig, content))"
)
DROP = "DROP INDEX IF EXISTS message_content_fts"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("memory", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
