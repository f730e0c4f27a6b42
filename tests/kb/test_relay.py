"""The words of an answer: particles, the asker's language, the scope said, the statuses a total
covers, and what `content` shows (kb.relay, kb.josa, kb.selectai.wording)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kb import proof
from kb.answering import QuestionRefused, answer_question
from kb.josa import josa
from kb.policy import StakeholderSnapshot, outside_scope
from kb.relay import TABLE_ROWS, answer_text
from kb.selectai.question import main_language
from kb.selectors import stakeholder_get
from tests.kb.conftest import AS_OF
from tests.kb.truth import CONTRACTS, CUSTOMERS


def ask(stakeholder_id: str, prompt: str, limit: int = 50) -> dict:
    return answer_question(stakeholder_id=stakeholder_id, prompt=prompt, limit=limit)


@pytest.mark.parametrize(
    ("word", "pair", "said"),
    [
        ("계약", "이/가", "계약이"),
        ("보험료 납입", "이/가", "보험료 납입이"),
        ("고객 수", "은/는", "고객 수는"),
        ("종로지점", "은/는", "종로지점은"),
        ("서울", "으로/로", "서울로"),
        ("강남", "으로/로", "강남으로"),
        ("'천오백만원'", "을/를", "'천오백만원'을"),
        ("15,000,000원 이상", "으로/로", "15,000,000원 이상으로"),
        ("VIP", "이/가", "VIP가"),
        ("30", "은/는", "30은"),
        ("2", "이/가", "2가"),
        ("7", "으로/로", "7로"),
        ("'김'", "으로/로", "'김'으로"),
        ("", "은/는", ""),
    ],
)
def test_the_particle_fits_the_word(word, pair, said):
    assert josa(word, pair) == said


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("VIP 고객 목록", "ko"),
        ("list VIP customers", "en"),
        ("show me the customers of 강남지점", "en"),
        ("강남지점 VIP 고객 show", "ko"),
        ("KB암보험 계약", "ko"),
        ("", "ko"),
    ],
)
def test_an_answer_follows_the_questions_main_language(text, language):
    assert main_language(text) == language


# --- what content shows -------------------------------------------------------------------------


def test_content_shows_at_most_twenty_rows_and_says_how_many_more(kb):
    answer = ask("KB-M-001", "고객 목록", limit=50)
    text = answer_text(answer)
    table = [line for line in text.splitlines() if line.startswith("| ")]
    assert answer["row_count"] == 50 and answer["truncated"]
    assert len(table) == 1 + TABLE_ROWS
    assert f"({50 - TABLE_ROWS}건 더 있음, 한도 밖에도 더 있음)" in text
    assert text.startswith("고객 목록: 50명이 넘어 처음 50명을 보여 줍니다 (강남지점 기준, ")
    assert "가려진 열(이 사용자 권한): 전화번호." in text


def test_a_single_total_is_its_sentence_and_no_table(kb):
    answer = ask("KB-P-001", "고객 수")
    mine = sum(1 for c in CUSTOMERS.values() if c["planner_id"] == "KB-P-001")
    assert answer["interpretation"]["summary"] == (
        f"고객 수는 {mine}명입니다 (윤지유 설계사(KB-P-001) 담당 고객 기준, {AS_OF} 현재)."
    )
    assert "|" not in answer_text(answer)


def test_an_analysts_masked_and_withheld_columns_are_named(kb):
    answer = ask("KB-H-001", "list VIP customers", limit=3)
    assert answer["masked_columns"] == ["customer_name", "age"]  # age from the birth year
    assert "Masked for this user: customer name, age." in answer_text(answer)
    assert "the whole company" in answer["interpretation"]["summary"]


# --- scope --------------------------------------------------------------------------------------


def asker(stakeholder_id: str) -> StakeholderSnapshot:
    snapshot = StakeholderSnapshot.of(stakeholder_get(stakeholder_id))
    assert snapshot is not None
    return snapshot


@pytest.mark.parametrize(
    ("stakeholder_id", "filters", "outside"),
    [
        ("KB-M-001", [("branch_id", "eq", "BR-JR")], [("branch_id", "BR-JR")]),
        ("KB-M-001", [("branch_id", "eq", "BR-GN")], []),
        ("KB-M-001", [("branch_id", "in", ["BR-GN", "BR-HD"])], [("branch_id", "BR-HD")]),
        ("KB-M-001", [("planner_id", "eq", "KB-P-002")], []),  # a planner of the branch
        ("KB-M-001", [("planner_id", "eq", "KB-P-003")], [("planner_id", "KB-P-003")]),
        ("KB-M-001", [("branch_id", "ne", "BR-JR")], []),  # naming a branch to leave it out
        ("KB-P-001", [("planner_id", "eq", "KB-P-002")], [("planner_id", "KB-P-002")]),
        ("KB-P-001", [("planner_id", "ne", "KB-P-001")], [("planner_id", "*")]),
        ("KB-P-001", [("branch_id", "eq", "BR-GN")], []),
        ("KB-H-001", [("branch_id", "eq", "BR-JR")], []),
    ],
)
def test_what_a_plan_names_outside_the_askers_rows(kb, stakeholder_id, filters, outside):
    plan = {"filters": [{"field": f, "op": op, "value": v} for f, op, v in filters]}
    assert list(outside_scope(plan, asker(stakeholder_id))) == outside


def test_a_planner_asking_for_another_planner_is_told_so(kb):
    answer = ask("KB-P-001", "안채원 설계사 고객 목록")
    assert answer["rows"] == []
    assert answer["interpretation"]["notes"] == [
        "안채원 설계사(KB-P-002)의 고객은 조회 범위 밖입니다 (윤지유 설계사(KB-P-001) 담당 고객만)."
    ]
    inside = ask("KB-M-001", "안채원 설계사 고객 목록")
    assert inside["rows"] and "notes" not in inside["interpretation"]


def test_an_english_question_hears_its_scope_in_english(kb):
    answer = ask("KB-M-001", "customers of 해운대지점")
    assert answer["interpretation"]["notes"] == [
        "해운대지점 is outside what you may see (branch 강남지점 only)."
    ]


# --- conventions --------------------------------------------------------------------------------


def branch_premiums(branch_id: str, statuses: set[str]) -> int:
    customers = {c["customer_id"] for c in CUSTOMERS.values() if c["branch_id"] == branch_id}
    return sum(
        int(k["monthly_premium"])
        for k in CONTRACTS.values()
        if k["customer_id"] in customers and k["status"] in statuses
    )


def test_a_premium_total_counts_in_force_contracts_unless_asked(kb):
    every = {"유지", "실효", "해지", "만기"}
    cases = {
        "월보험료 합계": {"유지"},
        "모든 상태의 월보험료 합계": every,
        "해지 계약 월보험료 합계": {"해지"},
        "total monthly premium regardless of status": every,
    }
    for prompt, statuses in cases.items():
        answer = ask("KB-M-001", prompt)
        total = answer["rows"][0]["total_monthly_premium"]
        assert total == branch_premiums("BR-GN", statuses), prompt
        assert answer["interpretation"]["notes"], prompt  # the statuses it covers, said
    assert (
        "해지만 포함합니다"
        in ask("KB-M-001", "해지 계약 월보험료 합계")["interpretation"]["notes"][0]
    )


def test_counting_contracts_keeps_every_status_and_says_so(kb):
    answer = ask("KB-M-001", "계약 건수")
    notes = answer["interpretation"]["notes"]
    assert notes == ["모든 계약 상태(유지, 실효, 해지, 만기)를 포함합니다."]


def test_the_second_reading_holds_the_convention_both_ways():
    ranked = {
        "entity": "contracts",
        "filters": [{"field": "status", "op": "eq", "value": "유지"}],
        "group_by": [],
        "aggregates": [{"fn": "sum", "field": "monthly_premium", "as": "total_monthly_premium"}],
        "order_by": [],
    }
    without = {**ranked, "filters": []}
    read = proof.normalise
    assert not proof.proofread(read("월보험료 합계"), ranked, AS_OF)
    assert proof.proofread(read("월보험료 합계"), without, AS_OF)  # the convention is missing
    assert proof.proofread(read("모든 상태 월보험료 합계"), ranked, AS_OF)
    assert not proof.proofread(read("모든 상태 월보험료 합계"), without, AS_OF)
    # A question about no premium at all may not carry the in-force status.
    assert proof.proofread(read("담당 고객 계약 보여줘"), ranked, AS_OF)


# --- refusals close to the question ---------------------------------------------------------------


def test_a_refusal_suggests_the_shape_the_question_was_after(kb):
    with pytest.raises(QuestionRefused) as refused:
        ask("KB-M-001", "Which products sell best in my branch?")
    assert refused.value.suggestions[0] == "number of contracts by product"
    with pytest.raises(QuestionRefused) as refused:
        ask("KB-M-001", "등급별로 인기 있는 상품")  # nothing the reader can use, but two shapes
    assert refused.value.reason == "not_understood"
    assert refused.value.suggestions[:2] == ("등급별 계약 수", "상품별 계약 수")


def test_an_unreadable_question_is_offered_the_examples_nearest_it(kb):
    asked = {}
    for prompt in ("hello, who are you?", "what is the weather"):
        with pytest.raises(QuestionRefused) as refused:
            ask("KB-P-001", prompt)
        asked[prompt] = refused.value.suggestions
        assert refused.value.reason == "not_understood"
    assert len({tuple(s) for s in asked.values()}) == 2, asked


# --- the answers docs/select-ai.md shows ----------------------------------------------------------

DOC = Path(__file__).resolve().parents[2] / "docs" / "select-ai.md"
SHOWN = re.compile(r"<!-- answer-as-received: (\S+) \| (.+?) -->\n```text\n(.*?)\n```", re.S)


def test_the_documented_answers_are_what_an_agent_receives(kb):
    shown = SHOWN.findall(DOC.read_text(encoding="utf-8"))
    assert len(shown) == 2
    languages = set()
    for stakeholder_id, prompt, text in shown:
        assert answer_text(ask(stakeholder_id, prompt)) == text, prompt
        languages.add(main_language(prompt))
    assert languages == {"ko", "en"}


def test_a_count_and_the_money_beside_it_are_both_answered_in_one_sentence(kb):
    answer = ask("KB-M-001", "미납 건수와 미납 금액")
    row = answer["rows"][0]
    assert set(row) == {"count", "total_amount"}
    assert answer["interpretation"]["summary"].startswith(
        f"미납 건수는 {row['count']}건, 미납 금액 합계는 {row['total_amount']:,}원입니다 ("
    )
    english = ask("KB-M-001", "unpaid count and amount")
    assert english["rows"] == answer["rows"]
    assert (
        f": {row['count']}; KRW {row['total_amount']:,} (" in english["interpretation"]["summary"]
    )
    # An amount to compare with keeps the money word a condition, not a second total.
    assert set(ask("KB-M-001", "금액 10만원 이상 미납 건수")["rows"][0]) == {"count"}
