"""PostgreSQL row-level security for the KB tables and the reader role KB reads run as.

A no-op on other databases. Re-running it (or a later migration calling kb_rls_install again after
a policy change) is safe: policies are dropped and recreated, the role is created only if missing.
"""

import logging

from django.db import migrations

log = logging.getLogger(__name__)


def install(apps, schema_editor):
    from kb.services import kb_rls_install

    for warning in kb_rls_install(connection=schema_editor.connection):
        log.warning("KB reader role not fully set up (run manage.py setup_kb_db_role): %s", warning)


def uninstall(apps, schema_editor):
    from kb.services import kb_rls_uninstall

    kb_rls_uninstall(connection=schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [("kb", "0001_initial")]

    operations = [migrations.RunPython(install, uninstall, elidable=False)]
