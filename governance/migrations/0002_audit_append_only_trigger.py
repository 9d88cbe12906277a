"""On PostgreSQL the audit table rejects UPDATE and DELETE at the database level, so not
even code that bypasses the model (raw SQL, a bulk update) can rewrite history.

TRUNCATE is left to the table owner: the test runner flushes tables with it, and a
production deployment should connect as a role that does not own the tables."""

from __future__ import annotations

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION governance_audit_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'governance_auditevent is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS governance_auditevent_append_only ON governance_auditevent;
CREATE TRIGGER governance_auditevent_append_only
    BEFORE UPDATE OR DELETE ON governance_auditevent
    FOR EACH ROW EXECUTE FUNCTION governance_audit_append_only();
"""
DROP = """
DROP TRIGGER IF EXISTS governance_auditevent_append_only ON governance_auditevent;
DROP FUNCTION IF EXISTS governance_audit_append_only();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # params=None: the function body uses % (RAISE format), not query placeholders.
        schema_editor.execute(CREATE, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("governance", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
