"""Each stage of the question reader on its own: given the analysed question, the plan fragment it
returns and the words it says it used (pure: no database)."""

from __future__ import annotations

import pytest

from kb.catalogue import CONTRACTS, CUSTOMERS, PAYMENTS
from kb.selectai.parser import compose, leftover_tokens
from kb.selectai.question import Question
from kb.selectai.related import related_part
from kb.selectai.shape import shape_stage
from kb.selectai.stages import (
    age_stage,
    amount_stage,
    birth_stage,
    entity_stage,
    other_stage,
    period_stage,
    personal_text_stage,
    status_stage,
    values_stage,
)
from kb.selectai.vocabulary import vocabulary_from_csv
from tests.kb.conftest import AS_OF, DEMO_DIR


@pytest.fixture(scope="module")
def vocabulary():
    return vocabulary_from_csv(DEMO_DIR)


def ask(vocabulary, text, role="planner", asker="KB-P-001", branch="BR-GN") -> Question:
    return Question(text, vocabulary, AS_OF, 50, role, asker, branch)


def words(q: Question, tokens) -> list[str]:
    return q.words(tokens)


NONE = frozenset()


@pytest.mark.parametrize(
    ("text", "entity"),
    [
        ("이번 달 미납 보험료", PAYMENTS),
        ("VIP 고객의 유지 계약", CONTRACTS),
        ("매달 20만원 넘게 내는 계약 수", CONTRACTS),
        ("여성 고객 목록", CUSTOMERS),
        ("보험료 상위 5개 계약", CONTRACTS),
    ],
)
def test_the_entity_stage_picks_the_table_and_uses_its_nouns(vocabulary, text, entity):
    q = ask(vocabulary, text)
    found, fragment = entity_stage(q)
    assert found == entity
    assert fragment.filters == [] and fragment.unusable == set()
    assert any(w in " ".join(words(q, fragment.consumed)) for w in ("보험료", "계약", "고객"))


def test_the_birth_stage_reads_years_ranges_and_birthdays(vocabulary):
    q = ask(vocabulary, "1970년부터 1979년 사이에 태어난 고객")
    fragment = birth_stage(q, CUSTOMERS)
    assert fragment.filters == [
        {"field": "birth_date", "op": "between", "value": ["1970-01-01", "1979-12-31"]}
    ]
    assert {"1970", "1979", "년", "사이", "태어나"} <= set(_each(q, fragment))
    q = ask(vocabulary, "생일이 7월인 고객")
    (birthday,) = birth_stage(q, CUSTOMERS).filters
    assert birthday == {
        "field": "birth_date",
        "op": "month_day_between",
        "value": ["07-01", "07-31"],
    }
    q = ask(vocabulary, "생일이 12일인 고객")
    (every_12th,) = birth_stage(q, CUSTOMERS).filters
    assert every_12th["op"] == "month_day_in" and len(every_12th["value"]) == 12


def _each(q, fragment) -> list[str]:
    return [q.tokens[i].form for i in sorted(fragment.consumed)]


def test_the_personal_text_stage_keeps_every_condition_on_a_personal_column(vocabulary):
    q = ask(vocabulary, "김씨 성을 가진 고객", role="hq_analyst")
    fragment = personal_text_stage(q, CUSTOMERS, NONE)
    assert fragment.filters == [{"field": "customer_name", "op": "startswith", "value": "김"}]
    q = ask(vocabulary, "주민번호 뒷자리가 2로 시작하는 고객")
    (rrn,) = personal_text_stage(q, CUSTOMERS, NONE).filters
    assert rrn["field"] == "rrn" and rrn["value"] == "2"


def test_the_period_stage_opens_a_period_after_next_month(vocabulary):
    q = ask(vocabulary, "다음 달 이후 만기되는 계약")
    part = period_stage(q, CONTRACTS, NONE)
    assert part.fragment.filters == [
        {"field": "end_date", "op": "between", "value": ["2026-08-01", "2999-12-31"]}
    ]
    assert "이후" in _each(q, part.fragment)


def test_the_values_stage_reads_lists_exclusions_and_regions(vocabulary):
    q = ask(vocabulary, "자동차랑 상해 말고 계약", role="hq_analyst")
    assert values_stage(q, CONTRACTS).filters == [
        {"field": "category", "op": "not_in", "value": ["자동차", "상해"]}
    ]
    q = ask(vocabulary, "서울 지역 고객", role="hq_analyst")
    assert values_stage(q, CUSTOMERS).filters == [
        {"field": "branch_id", "op": "in", "value": ["BR-GN", "BR-JR"]}
    ]
    q = ask(vocabulary, "Haeundae branch customers", role="hq_analyst")
    assert values_stage(q, CUSTOMERS).filters == [
        {"field": "branch_id", "op": "eq", "value": "BR-HD"}
    ]


def test_the_status_stage_cannot_apply_a_contract_status_to_payments(vocabulary):
    q = ask(vocabulary, "해지 미납 보험료")
    fragment = status_stage(q, PAYMENTS, NONE)
    assert fragment.filters == [{"field": "status", "op": "eq", "value": "미납"}]
    assert words(q, fragment.unusable) == ["해지"]


def test_the_age_stage_reads_ages_in_every_form(vocabulary):
    cases = {
        "60살 넘은 고객": [{"field": "age", "op": "gt", "value": 60}],
        "customers older than 60": [{"field": "age", "op": "gt", "value": 60}],
        "45세부터 55세까지 고객": [{"field": "age", "op": "between", "value": [45, 55]}],
        "customers in their 40s": [{"field": "age_group", "op": "eq", "value": "40대"}],
    }
    for text, filters in cases.items():
        assert age_stage(ask(vocabulary, text), CUSTOMERS, NONE).filters == filters, text


def test_the_amount_stage_reads_bands_and_two_sided_ranges(vocabulary):
    q = ask(vocabulary, "6만원대 월보험료 계약")
    assert amount_stage(q, CONTRACTS, NONE).filters == [
        {"field": "monthly_premium", "op": "gte", "value": 60000},
        {"field": "monthly_premium", "op": "lt", "value": 70000},
    ]
    q = ask(vocabulary, "가입금액 5천만~1억 계약")
    assert amount_stage(q, CONTRACTS, NONE).filters == [
        {"field": "sum_insured", "op": "between", "value": [50_000_000, 100_000_000]}
    ]


def test_the_other_stage_means_everyone_but_the_asker(vocabulary):
    q = ask(vocabulary, "다른 설계사 고객 목록")
    assert other_stage(q, CUSTOMERS).filters == [
        {"field": "planner_id", "op": "ne", "value": "KB-P-001"}
    ]


def test_the_shape_stage_puts_a_comparison_side_by_side(vocabulary):
    q = ask(vocabulary, "강남지점과 종로지점 고객 수 비교", role="hq_analyst")
    filters = values_stage(q, CUSTOMERS).filters
    shape = shape_stage(q, CUSTOMERS, filters, None, NONE)
    assert shape.group_by == ["branch_id", "branch_name"]
    assert shape.aggregates == [{"fn": "count", "field": None, "as": "count"}]
    assert "비교" in _each(q, shape.fragment)


@pytest.mark.parametrize(
    ("text", "head", "entity", "exists"),
    [
        ("연체가 전혀 없는 고객", CUSTOMERS, PAYMENTS, False),
        ("customers with no lapsed contract", CUSTOMERS, CONTRACTS, False),
        ("미납 건이 하나도 없는 계약 목록", CONTRACTS, PAYMENTS, False),
        ("암보험이나 종신보험 유지 계약이 있는 고객", CUSTOMERS, CONTRACTS, True),
        ("올 상반기에 연체된 계약", CONTRACTS, PAYMENTS, True),
    ],
)
def test_the_related_rows_clause_names_the_rows_a_row_has_or_lacks(
    vocabulary, text, head, entity, exists
):
    part = related_part(ask(vocabulary, text))
    assert (part.head, part.entity, part.exists) == (head, entity, exists)


def test_no_related_rows_clause_where_no_word_asks_for_one(vocabulary):
    for text in ("VIP 고객의 유지 계약", "이번 달 미납 보험료", "미납 고객 명단"):
        assert related_part(ask(vocabulary, text)) is None, text


def test_what_no_stage_used_is_left_over_and_only_filler_is_silent(vocabulary):
    q = ask(vocabulary, "VIP 고객 좀 보여주세요 xyzzy")
    left = leftover_tokens(q, frozenset(i for i, t in enumerate(q.tokens) if t.form == "VIP"))
    assert "xyzzy" in words(q, left.changing)
    assert "좀" not in " ".join(words(q, left.changing))


def test_the_composer_refuses_with_the_words_and_answers_without_them(vocabulary):
    refused = compose(ask(vocabulary, "VIP 고객의 신용등급"), "담당 고객 기준")
    assert refused.plan is None and refused.refusal.reason == "out_of_data"
    assert refused.refusal.words == ("신용등급",)
    answered = compose(ask(vocabulary, "VIP 고객 목록"), "담당 고객 기준")
    assert answered.refusal is None and answered.interpretation["ignored"] == []
