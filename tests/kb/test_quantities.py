"""Quantities, comparatives and periods, read by grammar, as properties of the whole class.

Every integer hypothesis draws, rendered in every Korean and English form a person writes
(tests/kb/selectai_generator.py's renderers: 천오백만, 1천5백만, 1500만, 15,000,000, 15M, 15
million…), reads back as itself, by the question reader and by the proof-reader, each with its
own grammar. Every comparative form, before or after the number, maps to its operator; every
period form to its bounds.
"""

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb.proof import periods as proof_periods
from kb.proof.quantities import DOWN, EXACT, UP, quantities
from kb.selectai.recognise import recognise
from kb.selectai.vocabulary import vocabulary_from_csv
from tests.kb.conftest import AS_OF, DEMO_DIR
from tests.kb.selectai_generator import EN_BOUNDS, KO_BOUNDS, english_forms, korean_forms

VOCABULARY = vocabulary_from_csv(DEMO_DIR)
AMOUNTS = st.one_of(
    st.integers(min_value=1, max_value=99_999).map(lambda n: n * 1000),  # 1,000 .. 99,999,000
    st.integers(min_value=1, max_value=99).map(lambda n: n * 10_000_000),  # up to 9.9억
    st.integers(min_value=1, max_value=999_999_999),
)
DIRECTION = {"gte": UP, "gt": UP, "lte": DOWN, "lt": DOWN, "eq": EXACT}


def reader_numbers(text: str) -> list[int]:
    return [n.value for n in recognise(text, VOCABULARY)[1].numbers]


# Derandomised: the same 200 amounts every run, so a failure here is the code's, not the draw's
# (a wider search, run by hand with more examples, found the leading 이 and 만 cases).
@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(AMOUNTS)
def test_every_amount_in_every_form_reads_back_as_itself(n):
    forms = {**korean_forms(n), **english_forms(n)}
    for form, written in forms.items():
        text = (
            f"월보험료 {written}원 이상 계약"
            if form.startswith("ko")
            else (f"contracts over {written} won")
        )
        assert reader_numbers(text) == [n], (form, text)
        assert [q.value for q in quantities(text)] == [n], (form, text)


@pytest.mark.parametrize(("op", "form"), [(op, form) for op, forms in KO_BOUNDS.items()
                                          for form in forms])  # fmt: skip
def test_every_korean_bound_maps_to_its_operator(kb, op, form):
    from kb.answering import answer_question

    text = "월보험료 " + form.format(n="5만원") + "인 계약"
    assert [q.direction for q in quantities(text)] == [DIRECTION[op]]
    answer = answer_question(stakeholder_id="KB-M-001", prompt=text, limit=100)
    (condition,) = answer["interpretation"]["plan"]["filters"]
    assert (condition["op"], condition["value"]) == (op, 50_000)


@pytest.mark.parametrize(("op", "form"), [(op, form) for op, forms in EN_BOUNDS.items()
                                          for form in forms])  # fmt: skip
def test_every_english_bound_maps_to_its_operator(kb, op, form):
    from kb.answering import answer_question

    text = "contracts with a monthly premium of " + form.format(n="50,000 won")
    assert [q.direction for q in quantities(text)] == [DIRECTION[op]]
    answer = answer_question(stakeholder_id="KB-M-001", prompt=text, limit=100)
    (condition,) = answer["interpretation"]["plan"]["filters"]
    assert (condition["op"], condition["value"]) == (op, 50_000)


QUARTERS = {1: ("2026-01", "2026-03"), 2: ("2026-04", "2026-06")}
PERIODS = [
    *((f"{q}분기 미납 내역", months) for q, months in QUARTERS.items()),
    *((f"Q{q} unpaid premiums", months) for q, months in QUARTERS.items()),
    ("상반기 미납 내역", ("2026-01", "2026-06")),
    ("unpaid premiums in H1", ("2026-01", "2026-06")),
    ("작년 하반기 미납 내역", ("2025-07", "2025-12")),
    ("2025년 4분기 미납 내역", ("2025-10", "2025-12")),
    ("unpaid premiums in Q3 2025", ("2025-07", "2025-09")),
]


@pytest.mark.parametrize(("text", "months"), PERIODS)
def test_every_period_form_maps_to_its_bounds(kb, text, months):
    from kb.answering import answer_question

    (window,) = proof_periods.windows(text, quantities(text), AS_OF)
    first, last = months
    assert window.first == dt.date.fromisoformat(f"{first}-01")
    assert window.last.strftime("%Y-%m") == last
    answer = answer_question(stakeholder_id="KB-P-001", prompt=text, limit=100)
    conditions = answer["interpretation"]["plan"]["filters"]
    assert {"field": "due_month", "op": "between", "value": [first, last]} in conditions


@pytest.mark.parametrize(
    ("text", "first", "last", "direction"),
    [
        ("2024년 전에 가입한 고객", "2024-01-01", "2024-12-31", "before"),
        ("customers who joined before 2024", "2024-01-01", "2024-12-31", "before"),
        ("2023년 이후 가입한 고객", "2023-01-01", "2023-12-31", "after"),
        ("customers who joined since 2023", "2023-01-01", "2023-12-31", "after"),
        ("만기가 2027년까지인 계약", "2027-01-01", "2027-12-31", "until"),
        ("올해 들어 미납 내역", "2026-01-01", "2026-06-30", "in"),
        ("YTD unpaid premiums", "2026-01-01", "2026-06-30", "in"),
    ],
)
def test_every_year_form_maps_to_its_direction(text, first, last, direction):
    found = proof_periods.windows(text, quantities(text), AS_OF)
    assert (found[0].first.isoformat(), found[0].last.isoformat(), found[0].direction) == (
        first,
        last,
        direction,
    )
