"""The database itself refuses to change or delete audit events (beyond the ORM's refusal)."""

from django.db import migrations

POSTGRES_UP = """
CREATE OR REPLACE FUNCTION audit_event_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit events are append-only';
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS audit_event_append_only ON audit_auditevent;
CREATE TRIGGER audit_event_append_only BEFORE UPDATE OR DELETE ON audit_auditevent
    FOR EACH ROW EXECUTE FUNCTION audit_event_append_only();
"""
POSTGRES_DOWN = """
DROP TRIGGER IF EXISTS audit_event_append_only ON audit_auditevent;
DROP FUNCTION IF EXISTS audit_event_append_only();
"""
# SQLite: UPDATE is refused in the database; DELETE only by the ORM, because SQLite has no
# session setting that would let the test runner's flush through while refusing everyone else.
SQLITE_UP = """
CREATE TRIGGER IF NOT EXISTS audit_event_no_update BEFORE UPDATE ON audit_auditevent
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
"""
SQLITE_DOWN = "DROP TRIGGER IF EXISTS audit_event_no_update;"


def forwards(apps, schema_editor):
    sql = {"postgresql": POSTGRES_UP, "sqlite": SQLITE_UP}.get(schema_editor.connection.vendor)
    if sql:
        schema_editor.execute(sql)


def backwards(apps, schema_editor):
    sql = {"postgresql": POSTGRES_DOWN, "sqlite": SQLITE_DOWN}.get(schema_editor.connection.vendor)
    if sql:
        schema_editor.execute(sql)


class Migration(migrations.Migration):
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
