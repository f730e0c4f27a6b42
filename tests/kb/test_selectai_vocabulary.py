"""kb.selectai building blocks: the vocabulary, Korean numerals and calendar arithmetic (pure)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pytest

from kb.selectai.dates import Period, add_months, describe
from kb.selectai.numbers import english_number, native_korean_number, sino_korean_number
from kb.selectai.parser import parse_prompt
from kb.selectai.vocabulary import Vocabulary, vocabulary_from_csv, vocabulary_from_rows
from tests.kb.conftest import AS_OF

DATA = Path(__file__).resolve().parents[2] / "kb" / "data" / "kb_demo"

PRODUCTS = [
    {"product_code": "AUTO-01", "product_name": "KB다이렉트 자동차보험", "category": "자동차"},
    {"product_code": "DENT-01", "product_name": "KB치아보험", "category": "건강"},
]
BRANCHES = [{"branch_id": "BR-GN", "branch_name": "강남지점", "region": "서울"}]
STAKEHOLDERS = [
    {"stakeholder_id": "KB-P-001", "name": "윤지유", "role": "planner", "branch_id": "BR-GN"},
    {"stakeholder_id": "KB-M-001", "name": "서지민", "role": "branch_manager"},
    {"stakeholder_id": "KB-P-099", "name": "황지우", "role": "planner", "status": "suspended"},
    {"stakeholder_id": "", "name": "빈 아이디", "role": "planner"},
]


def parse(prompt, vocabulary):
    return parse_prompt(prompt, vocabulary=vocabulary, as_of=AS_OF, role="planner", limit=50)


def test_vocabulary_from_csv_reads_the_demo_dataset():
    vocabulary = vocabulary_from_csv(DATA)
    assert vocabulary.products["HLTH-02"].name == "KB암보험"
    assert set(vocabulary.categories) == {"자동차", "건강", "생명", "상해"}
    assert vocabulary.branches["BR-JR"] == "종로지점"
    assert len(vocabulary.planners) == 9  # eight active planners and one suspended one
    assert "KB-M-001" not in vocabulary.planners  # branch managers own no customers
    assert set(vocabulary.grades) == {"VIP", "일반"}
    assert set(vocabulary.contract_statuses) == {"유지", "실효", "해지", "만기"}
    assert set(vocabulary.payment_statuses) == {"납입", "미납"}


def test_vocabulary_from_rows_skips_incomplete_rows_and_uses_defaults():
    vocabulary = vocabulary_from_rows(
        products=PRODUCTS, branches=BRANCHES, stakeholders=STAKEHOLDERS
    )
    assert set(vocabulary.planners) == {"KB-P-001", "KB-P-099"}
    assert vocabulary.grades == ("VIP", "일반")
    assert vocabulary.statuses == ("유지", "실효", "해지", "만기", "납입", "미납")


def test_vocabulary_is_immutable_and_hashable():
    vocabulary = vocabulary_from_rows(products=PRODUCTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        vocabulary.grades = ("X",)
    with pytest.raises(TypeError):
        vocabulary.products["NEW"] = None
    assert hash(vocabulary) == hash(vocabulary_from_rows(products=PRODUCTS))


def test_parser_follows_the_vocabulary_it_is_given():
    vocabulary = vocabulary_from_rows(
        products=PRODUCTS, branches=BRANCHES, stakeholders=STAKEHOLDERS
    )
    plan = parse("치아보험 계약 목록", vocabulary).plan
    assert plan["filters"] == [{"field": "product_code", "op": "eq", "value": "DENT-01"}]
    # The demo vocabulary has no 치아보험: it invents no filter value and answers nothing else.
    demo = vocabulary_from_csv(DATA)
    result = parse("치아보험 계약 목록", demo)
    assert result.plan is None
    assert [w for w in result.refusal.words if "치아" in w]


def test_empty_vocabulary_still_answers():
    result = parse("이번 달 미납 보험료", Vocabulary())
    assert result.plan["entity"] == "premium_payments"


@pytest.mark.parametrize(
    ("word", "value"),
    [("하나", 1), ("한", 1), ("세", 3), ("다섯", 5), ("열", 10), ("열다섯", 15), ("스무", 20),
     ("스물한", 21), ("서른", 30), ("마흔", 40), ("사과", None)],
)  # fmt: skip
def test_native_korean_numbers(word, value):
    assert native_korean_number(word) == value


@pytest.mark.parametrize(
    ("word", "value"),
    [("삼", 3), ("십", 10), ("십이", 12), ("이십오", 25), ("백", 100), ("삼만", 30000),
     ("일이", None), ("고객", None)],
)  # fmt: skip
def test_sino_korean_numbers(word, value):
    assert sino_korean_number(word) == value


def test_english_numbers():
    assert english_number("Five") == 5
    assert english_number("twelve") == 12
    assert english_number("many") is None


def test_month_arithmetic_clips_the_day():
    assert add_months(dt.date(2026, 1, 31), 1) == dt.date(2026, 2, 28)
    assert add_months(dt.date(2026, 6, 30), -6) == dt.date(2025, 12, 30)
    assert add_months(dt.date(2026, 6, 30), 3) == dt.date(2026, 9, 30)


def test_period_description():
    months = Period(dt.date(2026, 4, 1), dt.date(2026, 6, 30), "최근 3개월")
    assert describe(months) == "2026-04~2026-06 (최근 3개월)"
    assert describe(months, with_label=False) == "2026-04~2026-06"
    day = Period(AS_OF, AS_OF, "오늘", whole_months=False)
    assert describe(day, with_label=False) == "2026-06-30"
