"""PostgreSQL only: the database itself enforces the row policy (row-level security), whatever the
query says, for reads running as the reader role."""

import pytest
from django.conf import settings
from django.db import DatabaseError, transaction
from django.db.models import Q

from kb import vpd
from kb.selectors import stakeholder_get
from tests.kb.conftest import (
    demo_rows,
    expected_contract_ids,
    expected_customer_ids,
    expected_payment_ids,
)

pytestmark = pytest.mark.postgres

TABLES = {
    "kb_customer": ("customer_id", expected_customer_ids),
    "kb_contract": ("contract_id", expected_contract_ids),
    "kb_premiumpayment": ("payment_id", expected_payment_ids),
}
STAKEHOLDERS = [s["stakeholder_id"] for s in demo_rows("stakeholders")]


def select_as_reader(connection, sql: str, *, stakeholder_id: str | None = None) -> list[tuple]:
    """Run raw SQL as the reader role, with the stakeholder context if given, then roll back."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL ROLE " + connection.ops.quote_name(settings.KB_DB_READER_ROLE))
        if stakeholder_id is not None:
            cursor.execute(
                "SELECT set_config('hyperbook.stakeholder_id', %s, true)", [stakeholder_id]
            )
        cursor.execute(sql)
        rows = cursor.fetchall()
        transaction.set_rollback(True)
    return rows


def ids_as_reader(connection, table: str, stakeholder_id: str | None) -> set[str]:
    key, _expected = TABLES[table]
    sql = f"SELECT {key} FROM {table}"  # noqa: S608 - fixed names from TABLES
    return {row[0] for row in select_as_reader(connection, sql, stakeholder_id=stakeholder_id)}


@pytest.mark.parametrize("table", TABLES)
def test_raw_sql_as_the_reader_without_a_context_returns_no_rows(on_postgres, kb_demo, table):
    assert ids_as_reader(on_postgres, table, None) == set()


@pytest.mark.parametrize("table", TABLES)
def test_the_same_raw_sql_as_the_connecting_superuser_sees_everything(on_postgres, kb_demo, table):
    # Why the reader role matters: a superuser (or the owner) is not bound by the policies.
    with on_postgres.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table}")  # noqa: S608
        assert cursor.fetchone()[0] > 0


@pytest.mark.parametrize("stakeholder_id", STAKEHOLDERS)
@pytest.mark.parametrize("table", TABLES)
def test_raw_sql_with_a_context_returns_exactly_that_stakeholders_rows(
    on_postgres, kb_demo, table, stakeholder_id
):
    _key, expected = TABLES[table]

    assert ids_as_reader(on_postgres, table, stakeholder_id) == expected(stakeholder_id)


@pytest.mark.parametrize("table", TABLES)
def test_planner_a_context_shows_none_of_planner_bs_rows(on_postgres, kb_demo, table):
    _key, expected = TABLES[table]
    seen = ids_as_reader(on_postgres, table, "KB-P-001")

    assert seen
    assert not seen & expected("KB-P-002")
    assert not seen & expected("KB-P-003")


def test_a_context_naming_an_unknown_stakeholder_returns_no_rows(on_postgres, kb_demo):
    assert ids_as_reader(on_postgres, "kb_customer", "' OR 1=1 --") == set()
    assert ids_as_reader(on_postgres, "kb_customer", "KB-Z-999") == set()


def test_the_reader_role_cannot_write(on_postgres, kb_demo):
    with pytest.raises(DatabaseError, match="permission denied"):
        select_as_reader(
            on_postgres,
            "UPDATE kb_customer SET grade = 'VIP' RETURNING customer_id",
            stakeholder_id="KB-H-001",
        )


def test_the_reader_role_is_nologin_and_does_not_bypass_rls(on_postgres):
    with on_postgres.cursor() as cursor:
        cursor.execute(
            "SELECT rolcanlogin, rolsuper, rolbypassrls FROM pg_roles WHERE rolname = %s",
            [settings.KB_DB_READER_ROLE],
        )
        assert cursor.fetchone() == (False, False, False)


def test_every_kb_data_table_forces_row_level_security(on_postgres):
    with on_postgres.cursor() as cursor:
        cursor.execute(
            "SELECT relname, relrowsecurity, relforcerowsecurity FROM pg_class"
            " WHERE relname IN ('kb_customer', 'kb_contract', 'kb_premiumpayment')"
        )
        assert sorted(cursor.fetchall()) == [
            ("kb_contract", True, True),
            ("kb_customer", True, True),
            ("kb_premiumpayment", True, True),
        ]


@pytest.mark.parametrize("stakeholder_id", ["KB-P-001", "KB-M-002"])
def test_rls_alone_limits_plans_when_the_query_filter_is_taken_away(
    on_postgres, kb_demo, monkeypatch, stakeholder_id
):
    monkeypatch.setattr(vpd, "visible_customers_q", lambda stakeholder, customer_path: Q())

    answer = vpd.execute_plan(
        {"entity": "premium_payments", "aggregates": [{"fn": "count", "field": None}]},
        stakeholder=stakeholder_get(stakeholder_id),
    )
    customers = vpd.execute_plan(
        {"entity": "customers", "fields": ["customer_id"], "limit": 100},
        stakeholder=stakeholder_get(stakeholder_id),
    )

    assert answer["rows"] == [{"count": len(expected_payment_ids(stakeholder_id))}]
    assert {row["customer_id"] for row in customers["rows"]} == expected_customer_ids(
        stakeholder_id
    )


def test_a_plan_leaves_no_role_or_context_behind_in_the_callers_transaction(on_postgres, kb_demo):
    with on_postgres.cursor() as cursor:
        cursor.execute("SELECT current_user")
        (before,) = cursor.fetchone()

        vpd.execute_plan({"entity": "customers"}, stakeholder=stakeholder_get("KB-H-001"))

        cursor.execute(
            "SELECT current_user, coalesce(current_setting('hyperbook.stakeholder_id', true), '')"
        )
        assert cursor.fetchone() == (before, "")


def test_a_plan_that_fails_also_leaves_nothing_behind(on_postgres, kb_demo, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(vpd, "_fetch", explode)
    with pytest.raises(RuntimeError):
        vpd.execute_plan({"entity": "customers"}, stakeholder=stakeholder_get("KB-H-001"))

    with on_postgres.cursor() as cursor:
        cursor.execute("SELECT coalesce(current_setting('hyperbook.stakeholder_id', true), '')")
        assert cursor.fetchone() == ("",)
