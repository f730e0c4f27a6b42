import io

import pytest
from django.core.management import call_command
from django.db import connection, transaction

from conftest import service_missing


@pytest.fixture
def on_postgres(db):
    if connection.vendor != "postgresql":
        service_missing("this test needs PostgreSQL (run with DATABASE_URL=postgres://...)")
    return connection


@pytest.fixture(scope="module")
def kb_demo(django_db_setup, django_db_blocker):
    """The demo data, loaded once per test module in a transaction that is rolled back after it.

    Each test's own `db` transaction nests inside (as a savepoint), so tests stay independent.
    """
    with django_db_blocker.unblock(), transaction.atomic():
        call_command("load_kb_demo", stdout=io.StringIO())
        yield
        transaction.set_rollback(True)


def _row_counts() -> tuple[int, ...]:
    """How many rows each of the project's tables holds, in one statement (the tests connect as a
    superuser on PostgreSQL, whom the KB tables' row-level security does not hide rows from)."""
    tables = sorted(connection.introspection.django_table_names(only_existing=True))
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(f"(SELECT COUNT(*) FROM {quote(t)})" for t in tables))
        return tuple(cursor.fetchone())


@pytest.fixture(scope="session")
def _rows_as_migrated(django_db_setup, django_db_blocker) -> tuple[int, ...]:
    with django_db_blocker.unblock():
        return _row_counts()


@pytest.fixture(scope="module", autouse=True)
def _committed_rows_flushed(request):
    """A module whose tests share committed rows with a server process (tests.live) leaves
    them behind; they are flushed when it ends, as a transactional test's are, so that the next
    module starts from the migrated database whichever order or worker runs it."""
    module = request.module
    if not any(i.module is module and i.get_closest_marker("db") for i in request.session.items):
        yield
        return
    as_migrated = request.getfixturevalue("_rows_as_migrated")
    yield
    with request.getfixturevalue("django_db_blocker").unblock():
        if _row_counts() != as_migrated:
            call_command("flush", interactive=False, verbosity=0)
