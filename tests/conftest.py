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
