"""PostgreSQL only: a pooled connection carries no stakeholder context from one transaction into
the next. Real commits, so this module uses transactional_db (tables are flushed afterwards)."""

import io

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, transaction

from conftest import service_missing
from kb.selectors import stakeholder_get
from kb.vpd import execute_plan

pytestmark = pytest.mark.postgres


@pytest.fixture
def committed_demo(transactional_db):
    if connection.vendor != "postgresql":
        service_missing("this test needs PostgreSQL (run with DATABASE_URL=postgres://...)")
    call_command("load_kb_demo", stdout=io.StringIO())


def count_customers_as_reader(cursor) -> int:
    cursor.execute("SET LOCAL ROLE " + connection.ops.quote_name(settings.KB_DB_READER_ROLE))
    cursor.execute("SELECT count(*) FROM kb_customer")
    return cursor.fetchone()[0]


def test_a_context_set_in_one_transaction_is_gone_in_the_next(committed_demo):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('hyperbook.stakeholder_id', 'KB-H-001', true)")
        assert count_customers_as_reader(cursor) == 214

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT current_user = session_user")
        assert cursor.fetchone() == (True,)
        assert count_customers_as_reader(cursor) == 0


def test_a_committed_plan_leaves_the_connection_as_it_found_it(committed_demo):
    execute_plan({"entity": "customers"}, stakeholder=stakeholder_get("KB-H-001"))

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user = session_user,"
            " coalesce(current_setting('hyperbook.stakeholder_id', true), '')"
        )
        assert cursor.fetchone() == (True, "")
        assert count_customers_as_reader(cursor) == 0


def test_one_stakeholders_plan_never_sees_the_previous_stakeholders_rows(committed_demo):
    hq = execute_plan(
        {"entity": "customers", "aggregates": [{"fn": "count", "field": None}]},
        stakeholder=stakeholder_get("KB-H-001"),
    )
    planner = execute_plan(
        {"entity": "customers", "aggregates": [{"fn": "count", "field": None}]},
        stakeholder=stakeholder_get("KB-P-003"),
    )

    assert hq["rows"] == [{"count": 214}]
    assert planner["rows"] == [{"count": 23}]
