"""The second held-out Select AI set: questions written the way planners, branch managers and
head-office analysts ask an assistant, by people who had not read the question reader.

Every truth is computed from the CSV files with the suite's helpers (tests.kb.selectai_suite,
tests.kb.truth), never through the code under test. A case expects either rows or numbers (its
truth), or a refusal naming what the KB cannot answer: data it does not hold, or a condition on a
column the asker sees masked. Used by tests/kb/test_selectai_heldout2.py and
bench/selectai_accuracy.py, which reports each family's right / refused / flagged / silent runs.
"""

from __future__ import annotations

from tests.kb.selectai_suite import (  # noqa: F401  (the cases below use these)
    HQ,
    M1,
    M2,
    M3,
    M4,
    P1,
    P2,
    P3,
    P4,
    P5,
    P6,
    P7,
    P8,
    C,
    Case,
    K,
    P,
    contr,
    contract_view,
    counted,
    cust,
    customer_view,
    group,
    grouped,
    month_in,
    nothing_visible,
    paid_totals,
    payment_view,
    pays,
    ranked,
    refused,
    rows_are,
    same_either_way,
    unpaid_in,
)
from tests.kb.truth import AS_OF, BRANCHES, PRODUCTS, age  # noqa: F401

FAMILIES = (
    "birth_age",  # birth month or day without a year, ages in every form
    "negated_existence",  # "연체가 전혀 없는 고객": the complement
    "value_lists",  # "건강이나 생명", "A와 B 말고": in / not in
    "ranges",  # two-sided ranges, bands (N만원대, N0대), 이후/이전 relative to the as-of date
    "payment_words",  # 낸/안 낸/밀린/연체, 요즘/이번 분기/올 상반기, 매달 = the monthly premium
    "shape",  # rows (내역, 목록, 누구) or a number (몇, 얼마, 합계), "A와 B 비교" grouped
    "places",  # branch names in Korean and romanised, regions (서울, 부산, 대전)
    "masked",  # conditions on a column the asker sees masked, in every phrasing: refused
    "out_of_data",  # claims, addresses, e-mail, income, credit, forecasts…: refused by name
    "inference",  # attempts to learn a masked value indirectly: refused
    "everyday",  # mixed questions as assistants get them, several conditions at once
)

CASES: list[Case] = []


def add(family: str, sid: str, prompt: str, check, *, limit: int = 100, refusal=False) -> None:
    assert family in FAMILIES, family
    number = sum(c.family == family for c in CASES) + 1
    case_id = f"heldout2-{family}-{number:02d}"
    CASES.append(Case(case_id, family, sid, prompt, limit, check, refusal))


def by_family() -> dict[str, list[Case]]:
    families: dict[str, list[Case]] = {family: [] for family in FAMILIES}
    for case in CASES:
        families[case.family].append(case)
    return families


def customers_with(rows, pred) -> frozenset[str]:
    """The customer ids of the contract or payment rows that satisfy pred."""
    return frozenset(r["customer_id"] for r in rows if pred(r))


# --- the cases ----------------------------------------------------------------------------
