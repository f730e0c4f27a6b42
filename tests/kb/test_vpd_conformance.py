"""VPD conformance: for every stakeholder in the dataset, what the data layer returns equals the
README's policy computed independently from the CSV files. Runs on SQLite and on PostgreSQL."""

from collections import Counter

import pytest

from kb.models import Stakeholder
from kb.policy import PolicyRefused
from kb.selectors import stakeholder_get
from kb.vpd import execute_plan
from tests.kb.conftest import (
    AS_OF,
    demo_rows,
    expected_contract_ids,
    expected_customer_ids,
    expected_payment_ids,
    stakeholder_row,
)

ACTIVE = [s["stakeholder_id"] for s in demo_rows("stakeholders") if s["status"] == "active"]
SUSPENDED = [s["stakeholder_id"] for s in demo_rows("stakeholders") if s["status"] != "active"]
ENTITY_KEYS = {
    "customers": ("customers", "customer_id"),
    "contracts": ("contracts", "contract_id"),
    "premium_payments": ("premium_payments", "payment_id"),
}
CUSTOMER_FIELDS = [
    "customer_name",
    "birth_date",
    "gender",
    "phone",
    "rrn",
    "planner_id",
    "planner_name",
    "branch_id",
    "branch_name",
    "grade",
    "joined_on",
    "age",
    "age_group",
]


def all_visible_rows(entity: str, stakeholder: Stakeholder, fields=()) -> list[dict]:
    """Every row the stakeholder can read, through the public API, in id ranges of at most 100
    (the limit) taken from the CSV's full id list, so no chunk can be truncated."""
    csv_name, key = ENTITY_KEYS[entity]
    ids = sorted(row[key] for row in demo_rows(csv_name))
    rows = []
    for start in range(0, len(ids), 100):
        chunk = ids[start : start + 100]
        answer = execute_plan(
            {
                "entity": entity,
                "fields": list(fields),
                "filters": [{"field": key, "op": "between", "value": [chunk[0], chunk[-1]]}],
                "limit": 100,
            },
            stakeholder=stakeholder,
        )
        assert answer["truncated"] is False
        rows += answer["rows"]
    return rows


def masked_name(name: str) -> str:
    return name[0] + "*" * (len(name) - 1)


def expected_customer_row(row: dict, role: str) -> dict:
    planners = {s["stakeholder_id"]: s["name"] for s in demo_rows("stakeholders")}
    branches = {b["branch_id"]: b["branch_name"] for b in demo_rows("branches")}
    year, month, day = (int(part) for part in row["birth_date"].split("-"))
    exact_age = AS_OF.year - year - ((month, day) > (AS_OF.month, AS_OF.day))
    head, middle, tail = row["phone"].split("-")
    expected = {
        "customer_id": row["customer_id"],
        "customer_name": row["customer_name"],
        "birth_date": row["birth_date"],
        "gender": row["gender"],
        "phone": row["phone"],
        "rrn": row["rrn"][:8] + "******",
        "planner_id": row["planner_id"],
        "planner_name": planners[row["planner_id"]],
        "branch_id": row["branch_id"],
        "branch_name": branches[row["branch_id"]],
        "grade": row["grade"],
        "joined_on": row["joined_on"],
        "age": exact_age,
        "age_group": f"{exact_age // 10 * 10}대",
    }
    if role == "branch_manager":
        expected["phone"] = f"{head}-{'*' * len(middle)}-{tail}"
    if role == "hq_analyst":
        year_age = AS_OF.year - year  # derived from the birth year only: all hq can see of it
        expected |= {
            "customer_name": masked_name(row["customer_name"]),
            "birth_date": str(year),
            "phone": None,
            "rrn": None,
            "age": year_age,
            "age_group": f"{year_age // 10 * 10}대",
        }
    return expected


@pytest.mark.parametrize("stakeholder_id", ACTIVE)
def test_each_stakeholder_sees_exactly_the_customers_the_policy_allows(kb, stakeholder_id):
    rows = all_visible_rows("customers", stakeholder_get(stakeholder_id))

    ids = [row["customer_id"] for row in rows]
    assert len(ids) == len(set(ids))
    assert set(ids) == expected_customer_ids(stakeholder_id)
    assert ids, "every active stakeholder in the dataset sees someone"


@pytest.mark.parametrize("stakeholder_id", ACTIVE)
def test_each_stakeholder_sees_exactly_the_contracts_of_visible_customers(kb, stakeholder_id):
    rows = all_visible_rows("contracts", stakeholder_get(stakeholder_id))

    assert {row["contract_id"] for row in rows} == expected_contract_ids(stakeholder_id)
    assert len(rows) == len(expected_contract_ids(stakeholder_id))


@pytest.mark.parametrize("stakeholder_id", ACTIVE)
def test_each_stakeholder_sees_exactly_the_payments_of_visible_customers(kb, stakeholder_id):
    rows = all_visible_rows("premium_payments", stakeholder_get(stakeholder_id))

    assert {row["payment_id"] for row in rows} == expected_payment_ids(stakeholder_id)
    assert len(rows) == len(expected_payment_ids(stakeholder_id))


@pytest.mark.parametrize("stakeholder_id", ACTIVE)
def test_customer_columns_are_masked_exactly_as_the_policy_table_says(kb, stakeholder_id):
    me = stakeholder_row(stakeholder_id)
    rows = all_visible_rows("customers", stakeholder_get(stakeholder_id), CUSTOMER_FIELDS)

    by_id = {c["customer_id"]: c for c in demo_rows("customers")}
    for row in rows:
        assert row == expected_customer_row(by_id[row["customer_id"]], me["role"])


@pytest.mark.parametrize("stakeholder_id", ACTIVE)
def test_customer_names_in_contracts_and_payments_are_masked_the_same_way(kb, stakeholder_id):
    me = stakeholder_row(stakeholder_id)
    stakeholder = stakeholder_get(stakeholder_id)
    names = {c["customer_id"]: c["customer_name"] for c in demo_rows("customers")}
    if me["role"] == "hq_analyst":
        names = {key: masked_name(name) for key, name in names.items()}

    for entity in ("contracts", "premium_payments"):
        rows = all_visible_rows(entity, stakeholder, ["customer_id", "customer_name"])
        assert rows
        assert all(row["customer_name"] == names[row["customer_id"]] for row in rows)


def test_the_masks_match_the_readme_examples(kb):
    hq = execute_plan(
        {
            "entity": "customers",
            "fields": ["customer_name", "birth_date", "phone", "rrn"],
            "filters": [{"field": "customer_id", "op": "eq", "value": "C0001"}],
        },
        stakeholder=stakeholder_get("KB-H-001"),
    )
    manager = execute_plan(
        {
            "entity": "customers",
            "fields": ["customer_name", "birth_date", "phone", "rrn"],
            "filters": [{"field": "customer_id", "op": "eq", "value": "C0001"}],
        },
        stakeholder=stakeholder_get("KB-M-001"),
    )

    # C0001 is 신하은, 1987-02-11, 010-8962-2842, 870211-2076141.
    assert hq["rows"] == [
        {
            "customer_id": "C0001",
            "customer_name": "신**",
            "birth_date": "1987",
            "phone": None,
            "rrn": None,
        }
    ]
    assert hq["masked_columns"] == ["customer_name", "birth_date", "phone", "rrn"]
    assert manager["rows"] == [
        {
            "customer_id": "C0001",
            "customer_name": "신하은",
            "birth_date": "1987-02-11",
            "phone": "010-****-2842",
            "rrn": "870211-2******",
        }
    ]
    assert manager["masked_columns"] == ["phone", "rrn"]


@pytest.mark.parametrize("stakeholder_id", ACTIVE)
def test_aggregates_count_and_sum_only_visible_rows(kb, stakeholder_id):
    stakeholder = stakeholder_get(stakeholder_id)
    customers = expected_customer_ids(stakeholder_id)
    contracts = [k for k in demo_rows("contracts") if k["customer_id"] in customers]
    visible_payments = expected_payment_ids(stakeholder_id)
    payments = [p for p in demo_rows("premium_payments") if p["payment_id"] in visible_payments]

    totals = execute_plan(
        {
            "entity": "premium_payments",
            "aggregates": [
                {"fn": "count", "field": None, "as": "count"},
                {"fn": "sum", "field": "amount", "as": "total_amount"},
            ],
        },
        stakeholder=stakeholder,
    )
    by_status = execute_plan(
        {
            "entity": "contracts",
            "group_by": ["status"],
            "aggregates": [
                {"fn": "count", "field": None, "as": "count"},
                {"fn": "sum", "field": "monthly_premium", "as": "total_monthly_premium"},
            ],
        },
        stakeholder=stakeholder,
    )
    customer_count = execute_plan(
        {"entity": "customers", "aggregates": [{"fn": "count", "field": None, "as": "count"}]},
        stakeholder=stakeholder,
    )

    assert totals["rows"] == [
        {"count": len(payments), "total_amount": sum(int(p["amount"]) for p in payments)}
    ]
    expected_by_status = {}
    for status in sorted({k["status"] for k in contracts}):
        rows = [k for k in contracts if k["status"] == status]
        expected_by_status[status] = {
            "status": status,
            "count": len(rows),
            "total_monthly_premium": sum(int(k["monthly_premium"]) for k in rows),
        }
    assert {row["status"]: row for row in by_status["rows"]} == expected_by_status
    assert customer_count["rows"] == [{"count": len(customers)}]


@pytest.mark.parametrize("stakeholder_id", ACTIVE)
def test_unpaid_amounts_per_month_only_count_visible_payments(kb, stakeholder_id):
    visible = expected_payment_ids(stakeholder_id)
    expected = Counter()
    for p in demo_rows("premium_payments"):
        if p["payment_id"] in visible and p["status"] == "미납":
            expected[p["due_month"]] += int(p["amount"])

    answer = execute_plan(
        {
            "entity": "premium_payments",
            "filters": [{"field": "status", "op": "eq", "value": "미납"}],
            "group_by": ["due_month"],
            "aggregates": [{"fn": "sum", "field": "amount", "as": "total_amount"}],
            "order_by": [{"field": "due_month", "direction": "asc"}],
        },
        stakeholder=stakeholder_get(stakeholder_id),
    )

    assert {row["due_month"]: row["total_amount"] for row in answer["rows"]} == dict(expected)
    assert [row["due_month"] for row in answer["rows"]] == sorted(expected)


def test_a_branch_manager_sees_every_planner_of_the_branch_and_no_other(kb):
    answer = execute_plan(
        {
            "entity": "customers",
            "group_by": ["planner_id"],
            "aggregates": [{"fn": "count", "field": None, "as": "count"}],
        },
        stakeholder=stakeholder_get("KB-M-003"),
    )

    expected = Counter(c["planner_id"] for c in demo_rows("customers") if c["branch_id"] == "BR-HD")
    assert {row["planner_id"]: row["count"] for row in answer["rows"]} == dict(expected)


@pytest.mark.parametrize("stakeholder_id", SUSPENDED)
def test_a_suspended_stakeholder_is_refused_before_any_query(
    kb, stakeholder_id, django_assert_num_queries
):
    suspended = stakeholder_get(stakeholder_id)

    with django_assert_num_queries(0), pytest.raises(PolicyRefused) as refused:
        execute_plan({"entity": "customers"}, stakeholder=suspended)
    assert refused.value.reason == "suspended"


def test_a_stakeholder_with_an_unknown_role_is_refused_before_any_query(
    kb, django_assert_num_queries
):
    auditor = Stakeholder.objects.create(
        stakeholder_id="KB-X-001", name="감사인", role="auditor", branch_id="BR-GN"
    )

    with django_assert_num_queries(0), pytest.raises(PolicyRefused) as refused:
        execute_plan({"entity": "premium_payments"}, stakeholder=auditor)
    assert refused.value.reason == "unknown_role"


def test_a_branch_manager_without_a_branch_is_refused(kb):
    drifting = Stakeholder.objects.create(
        stakeholder_id="KB-M-099", name="무소속", role="branch_manager", branch=None
    )

    with pytest.raises(PolicyRefused):
        execute_plan({"entity": "customers"}, stakeholder=drifting)


def test_a_stakeholder_that_is_not_in_the_database_is_refused(kb):
    ghost = Stakeholder(stakeholder_id="KB-H-404", name="유령", role="hq_analyst")

    with pytest.raises(PolicyRefused) as refused:
        execute_plan({"entity": "customers"}, stakeholder=ghost)
    assert refused.value.reason == "unknown_stakeholder"


def test_an_in_memory_object_claiming_a_wider_role_is_refused(kb):
    forged = stakeholder_get("KB-P-001")
    forged.role = "hq_analyst"

    with pytest.raises(PolicyRefused) as refused:
        execute_plan({"entity": "customers"}, stakeholder=forged)
    assert refused.value.reason == "stale_stakeholder"


def test_a_stakeholder_suspended_after_it_was_looked_up_is_refused(kb):
    planner = stakeholder_get("KB-P-002")
    Stakeholder.objects.filter(pk="KB-P-002").update(status="suspended")

    with pytest.raises(PolicyRefused):
        execute_plan({"entity": "customers"}, stakeholder=planner)


def test_no_stakeholder_at_all_is_refused(kb):
    with pytest.raises(PolicyRefused):
        execute_plan({"entity": "customers"}, stakeholder=None)


def test_the_answer_names_the_stakeholder_and_the_as_of_date(kb):
    answer = execute_plan({"entity": "contracts"}, stakeholder=stakeholder_get("KB-M-002"))

    assert answer["stakeholder"] == {
        "id": "KB-M-002",
        "role": "branch_manager",
        "branch_id": "BR-JR",
    }
    assert answer["as_of"] == "2026-06-30"
