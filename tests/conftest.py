import pytest
from django.db import connection

from conftest import service_missing


@pytest.fixture
def on_postgres(db):
    if connection.vendor != "postgresql":
        service_missing("this test needs PostgreSQL (run with DATABASE_URL=postgres://...)")
    return connection
