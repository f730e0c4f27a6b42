"""The dataset and the VPD policy written out again over the raw CSV rows (plain Python only).

Shared by the Select AI tests and the accuracy bench: never computed through the code under test.
"""

import datetime as dt

from tests.kb.conftest import (
    AS_OF,
    demo_rows,
    expected_contract_ids,
    expected_customer_ids,
    expected_payment_ids,
    stakeholder_row,
)

CUSTOMERS = {c["customer_id"]: c for c in demo_rows("customers")}
CONTRACTS = {k["contract_id"]: k for k in demo_rows("contracts")}
PRODUCTS = {p["product_code"]: p for p in demo_rows("products")}
BRANCHES = {b["branch_id"]: b for b in demo_rows("branches")}
PEOPLE = {s["stakeholder_id"]: s for s in demo_rows("stakeholders")}


def role_of(stakeholder_id: str) -> str:
    return stakeholder_row(stakeholder_id)["role"]


def shown(role: str, column: str, value: str):
    """The README's column policy for one value."""
    if column == "customer_name" and role == "hq_analyst":
        return value[0] + "*" * (len(value) - 1)
    if column == "phone":
        if role == "hq_analyst":
            return None
        if role == "branch_manager":
            first, middle, last = value.split("-")
            return f"{first}-{'*' * len(middle)}-{last}"
    if column == "rrn":
        return None if role == "hq_analyst" else value[:8] + "*" * (len(value) - 8)
    if column == "birth_date" and role == "hq_analyst":
        return value[:4]
    return value


def age(birth_date: str, *, year_only: bool) -> int:
    born = dt.date.fromisoformat(birth_date)
    if year_only:  # hq_analyst sees the birth year only, so its ages come from the year
        return AS_OF.year - born.year
    return AS_OF.year - born.year - ((born.month, born.day) > (AS_OF.month, AS_OF.day))


def visible_customers(stakeholder_id: str) -> list[dict]:
    ids = expected_customer_ids(stakeholder_id)
    return [c for c in demo_rows("customers") if c["customer_id"] in ids]


def visible_contracts(stakeholder_id: str) -> list[dict]:
    ids = expected_contract_ids(stakeholder_id)
    return [k for k in demo_rows("contracts") if k["contract_id"] in ids]


def visible_payments(stakeholder_id: str) -> list[dict]:
    ids = expected_payment_ids(stakeholder_id)
    return [p for p in demo_rows("premium_payments") if p["payment_id"] in ids]


def customer_of_payment(payment: dict) -> dict:
    return CUSTOMERS[CONTRACTS[payment["contract_id"]]["customer_id"]]


def newest_first(payments: list[dict]) -> list[dict]:
    """due_month descending, then contract_id ascending (the order payment rows are listed in)."""
    by_contract = sorted(payments, key=lambda p: p["contract_id"])
    return sorted(by_contract, key=lambda p: p["due_month"], reverse=True)


def assert_policy_exact(answer: dict, stakeholder_id: str) -> None:
    """Rows only from the visible set; personal columns exactly as the policy shows them."""
    role = role_of(stakeholder_id)
    me = stakeholder_row(stakeholder_id)
    assert answer["stakeholder"] == {
        "id": stakeholder_id,
        "role": role,
        "branch_id": me["branch_id"] or None,
    }
    names = [c["name"] for c in answer["columns"]]
    for row in answer["rows"]:
        assert list(row) == names
        if "payment_id" in row:
            assert row["payment_id"] in expected_payment_ids(stakeholder_id)
        if "contract_id" in row:
            assert row["contract_id"] in expected_contract_ids(stakeholder_id)
        if "customer_id" not in row:
            continue
        assert row["customer_id"] in expected_customer_ids(stakeholder_id)
        customer = CUSTOMERS[row["customer_id"]]
        for column in ("customer_name", "phone", "rrn", "birth_date"):
            if column in row:
                assert row[column] == shown(role, column, customer[column]), (column, row)
        if "age" in row:
            assert row["age"] == age(customer["birth_date"], year_only=role == "hq_analyst")
        if role == "planner":
            assert customer["planner_id"] == stakeholder_id
        if role == "branch_manager":
            assert customer["branch_id"] == me["branch_id"]
    if role == "hq_analyst":
        for column in ("phone", "rrn"):
            assert all(row.get(column) is None for row in answer["rows"])


def assert_refusal_policy_exact(message: str, stakeholder_id: str) -> None:
    """A refusal says nothing of a row the asker may not see, nor a value it sees masked."""
    role = role_of(stakeholder_id)
    visible = expected_customer_ids(stakeholder_id)
    for customer in CUSTOMERS.values():
        if customer["customer_id"] not in visible:
            for column in ("customer_id", "customer_name", "phone", "rrn"):
                assert customer[column] not in message, (column, customer["customer_id"])
            continue
        for column in ("customer_name", "phone", "rrn", "birth_date"):
            value = customer[column]
            if shown(role, column, value) != value:
                assert value not in message, (column, customer["customer_id"])
