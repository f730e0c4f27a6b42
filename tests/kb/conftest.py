"""KB test fixtures: the demo dataset loaded once per module, and the CSV files read independently.

The expectations in these tests are computed from the CSV files with the csv module only, never
through the code under test.
"""

import csv
import datetime as dt
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

DEMO_DIR = Path(__file__).resolve().parents[2] / "kb" / "data" / "kb_demo"
AS_OF = dt.date(2026, 6, 30)  # settings.KB_AS_OF_DATE: the truth the tests compute against


@cache
def demo_rows(name: str) -> tuple[dict, ...]:
    with (DEMO_DIR / f"{name}.csv").open(encoding="utf-8", newline="") as handle:
        return tuple(csv.DictReader(handle))


def stakeholder_row(stakeholder_id: str) -> dict:
    return next(s for s in demo_rows("stakeholders") if s["stakeholder_id"] == stakeholder_id)


@cache
def expected_customer_ids(stakeholder_id: str) -> frozenset[str]:
    """The README's row policy, written out again over the raw CSV rows."""
    me = stakeholder_row(stakeholder_id)
    customers = demo_rows("customers")
    if me["status"] != "active":
        return frozenset()
    if me["role"] == "planner":
        return frozenset(
            c["customer_id"] for c in customers if c["planner_id"] == me["stakeholder_id"]
        )
    if me["role"] == "branch_manager":
        return frozenset(c["customer_id"] for c in customers if c["branch_id"] == me["branch_id"])
    if me["role"] == "hq_analyst":
        return frozenset(c["customer_id"] for c in customers)
    return frozenset()


@cache
def expected_contract_ids(stakeholder_id: str) -> frozenset[str]:
    visible = expected_customer_ids(stakeholder_id)
    return frozenset(
        k["contract_id"] for k in demo_rows("contracts") if k["customer_id"] in visible
    )


@cache
def expected_payment_ids(stakeholder_id: str) -> frozenset[str]:
    visible = expected_contract_ids(stakeholder_id)
    payments = demo_rows("premium_payments")
    return frozenset(p["payment_id"] for p in payments if p["contract_id"] in visible)


@pytest.fixture
def kb(kb_demo, db):
    """The demo data inside this test's transaction."""


# The exhaustive oracle runs (thousands of generated plans against the ORM) belong to the full run
# and to the PostgreSQL run, not to `make test-fast`; their one-plan cousins stay in it.
EXHAUSTIVE_ORACLES = {
    "test_every_entity_field_and_operator_answers_as_the_orm_did",
    "test_every_aggregate_and_grouping_answers_as_the_orm_did",
    "test_random_plans_answer_as_the_orm_did",
    "test_plans_on_masked_columns_are_refused_as_before",
}


# The question sets are asked whole in the full run; the quick loop asks each family's first
# question and every eighth one after, so a broken reader still shows there.
WHOLE_QUESTION_SETS = (
    "test_selectai_suite",
    "test_selectai_heldout",
    "test_selectai_heldout2",
    "test_selectai_heldout3",
)
QUICK_SAMPLE_EVERY = 8


def pytest_collection_modifyitems(config, items):
    asked: Counter = Counter()
    for item in items:
        module, test = item.module.__name__, getattr(item, "originalname", item.name)
        if module.endswith("test_vpd_compiled") and test in EXHAUSTIVE_ORACLES:
            item.add_marker(pytest.mark.slow)
        elif module.rsplit(".", 1)[-1] in WHOLE_QUESTION_SETS and hasattr(item, "callspec"):
            family = getattr(item.callspec.params.get("case"), "family", None)
            if asked[module, test, family] % QUICK_SAMPLE_EVERY:
                item.add_marker(pytest.mark.slow)
            asked[module, test, family] += 1
