"""The reader's general rules, each asked in several phrasings, against truth from the CSV files.

One rule per test, several wordings each: a rule that only holds for one sentence fails here.
"""

from __future__ import annotations

import re

import pytest

from kb.answering import answer_question
from tests.kb.selectai_suite import (
    HQ,
    M1,
    M4,
    P1,
    P3,
    C,
    Case,
    K,
    P,
    counted,
    cust,
    group,
    grouped,
    refused,
)


def born_in(month: int):
    return lambda c: int(c["birth_date"][5:7]) == month


RULES: dict[str, list[tuple[str, str, object, bool]]] = {
    "a birthday without a year": [
        (P1, "3월생 고객", cust(P1, born_in(3)), False),
        (P1, "생일이 3월인 고객 목록", cust(P1, born_in(3)), False),
        (P1, "customers born in March", cust(P1, born_in(3)), False),
        (HQ, "3월생 고객", refused("생년월일"), True),
        (HQ, "customers born in March", refused("birth", english=True), True),
    ],
    "ages in every form": [
        (M1, "나이 50세 이상 고객", cust(M1, lambda c: c["age"] >= 50), False),
        (M1, "50살 넘은 고객", cust(M1, lambda c: c["age"] > 50), False),
        (M1, "customers older than 50", cust(M1, lambda c: c["age"] > 50), False),
        (M1, "customers in their 50s", cust(M1, lambda c: 50 <= c["age"] <= 59), False),
        (M1, "50대 고객", cust(M1, lambda c: 50 <= c["age"] <= 59), False),
    ],
    "lists of values": [
        (M1, "건강이나 생명 계약", K(M1, lambda k: k["category"] in ("건강", "생명")), False),
        (M1, "건강, 생명 제외 계약", K(M1, lambda k: k["category"] not in ("건강", "생명")), False),
        (
            M1,
            "either health or life contracts",
            K(M1, lambda k: k["category"] in ("건강", "생명")),
            False,
        ),  # fmt: skip
    ],
    "two-sided ranges and bands": [
        (
            M1,
            "월보험료 5만원에서 10만원 사이 계약",
            K(M1, lambda k: 50_000 <= k["monthly_premium"] <= 100_000),
            False,
        ),
        (
            M1,
            "월보험료 5만원~10만원 계약",
            K(M1, lambda k: 50_000 <= k["monthly_premium"] <= 100_000),
            False,
        ),
        (
            M1,
            "monthly premium between 50,000 and 100,000 won contracts",
            K(M1, lambda k: 50_000 <= k["monthly_premium"] <= 100_000),
            False,
        ),
        (
            M1,
            "5만원대 월보험료 계약",
            K(M1, lambda k: 50_000 <= k["monthly_premium"] < 60_000),
            False,
        ),
    ],  # fmt: skip
    "everyday payment words": [
        (
            M1,
            "지난달 낸 보험료",
            P(M1, lambda p: p["due_month"] == "2026-05" and p["status"] == "납입"),
            False,
        ),
        (
            M1,
            "지난달 못 낸 보험료",
            P(M1, lambda p: p["due_month"] == "2026-05" and p["status"] == "미납"),
            False,
        ),
        (
            M1,
            "지난달 밀린 보험료",
            P(M1, lambda p: p["due_month"] == "2026-05" and p["status"] == "미납"),
            False,
        ),
        (
            HQ,
            "매달 20만원 넘게 내는 계약 수",
            K(HQ, lambda k: k["monthly_premium"] > 200_000),
            False,
        ),
    ],  # fmt: skip
    "places in Korean, romanised and by region": [
        (HQ, "종로 고객 수", C(HQ, lambda c: c["branch_id"] == "BR-JR"), False),
        (HQ, "Jongno branch customers count", C(HQ, lambda c: c["branch_id"] == "BR-JR"), False),
        (HQ, "서울 지역 고객 수", C(HQ, lambda c: c["branch_id"] in ("BR-GN", "BR-JR")), False),
        (
            HQ,
            "how many customers in Seoul",
            C(HQ, lambda c: c["branch_id"] in ("BR-GN", "BR-JR")),
            False,
        ),
    ],  # fmt: skip
    "masked-column conditions in every phrasing": [
        (HQ, "김씨 고객 목록", refused("고객명"), True),
        (HQ, "customers surnamed Kim", refused("customer name", english=True), True),
        (M1, "전화번호 국번이 8962인 고객", refused("전화"), True),
        (P1, "주민번호 끝자리가 1인 고객", refused("주민"), True),
    ],
}


def _cases():
    for rule, asked in RULES.items():
        for number, (sid, prompt, check, refusal) in enumerate(asked, start=1):
            if isinstance(check, frozenset):  # a set of ids: rows or a count of them
                key = next(iter(check))[:1]
                column = {"C": "customer_id", "K": "contract_id", "P": "payment_id"}[key]
                check = counted(column, check)
            yield pytest.param(Case(f"{rule}-{number}", rule, sid, prompt, 100, check, refusal),
                               id=f"{rule}: {prompt}")  # fmt: skip


@pytest.mark.parametrize("case", list(_cases()))
def test_each_rule_holds_in_every_phrasing(kb, case):
    case.run()


@pytest.mark.parametrize(
    "prompt",
    [
        "미납이 없는 고객 수",
        "연체가 한 번도 없는 고객은 몇 명",
        "how many customers have no unpaid premium",
    ],
)
def test_a_negated_existence_is_the_complement(kb, prompt):
    from tests.kb.selectai_suite import customer_view, payment_view

    unpaid = {p["customer_id"] for p in payment_view(M4) if p["status"] == "미납"}
    complement = frozenset(c["customer_id"] for c in customer_view(M4)) - unpaid
    assert unpaid and complement
    Case("negated", "negated", M4, prompt, 100, counted("customer_id", complement)).run()


@pytest.mark.parametrize(
    ("prompt", "key"),
    [("VIP와 일반 고객 수 비교", "grade"), ("compare female and male customers", "gender")],
)
def test_a_comparison_is_side_by_side(kb, prompt, key):
    from tests.kb.selectai_suite import customer_view

    Case("compare", "compare", P3, prompt, 100, grouped(key, group(customer_view(P3), key))).run()


@pytest.mark.parametrize(
    "prompt", ["VIP 고객 목록 3개만", "이번 달 미납 보험료", "show my contracts"]
)
def test_the_summary_counts_the_rows_the_answer_has(kb, prompt):
    answer = answer_question(stakeholder_id=P1, prompt=prompt, limit=50)
    rows = answer["row_count"]
    assert rows == len(answer["rows"])
    summary = answer["interpretation"]["summary"]
    said = re.search(r"(\d+)\s?(?:명|건|customers|contracts|payments)", summary)
    assert said and int(said.group(1)) == rows, summary
    assert answer["truncated"] == ("넘어" in summary or "more than" in summary), summary
