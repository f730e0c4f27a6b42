"""The second reading (kb.proof): every plan the question reader proposes is read against the
question again, and a plan that does not carry what the question says, or carries what it does
not, is refused (proof_disagrees) instead of answered.

The plans below are the misreadings the reader made before it read amounts, bounds and periods
by grammar, written out by hand: the proof-reader must catch each one, and let the right plan
through. The end-to-end tests replace the reader's plan with such a misreading and check that
nothing runs, that the refusal says how the words were read, and that a rephrasing is offered
only when the reader then reads it the same way.
"""

import datetime as dt

import pytest

from kb import proof
from kb.proof.quantities import DOWN, EXACT, UP, quantities

AS_OF = dt.date(2026, 6, 30)


def plan(entity="contracts", filters=(), group_by=(), aggregates=(), related=()):
    out = {"entity": entity, "fields": [], "filters": list(filters), "group_by": list(group_by),
           "aggregates": list(aggregates), "order_by": [], "limit": 100}  # fmt: skip
    if related:
        out["related"] = list(related)
    return out


def f(field, op, value):
    return {"field": field, "op": op, "value": value}


def disagrees(text, p):
    return proof.proofread(text, p, AS_OF)


# (question, the misread plan, the plan that reads it right)
MISREADINGS = [
    (
        "보험료 천오백만원 이상 계약",
        plan(filters=[f("monthly_premium", "gte", 1000), f("monthly_premium", "gte", 5_000_000)]),
        plan(filters=[f("monthly_premium", "gte", 15_000_000)]),
    ),
    (
        "가입금액 7천5백만원 이상 계약",
        plan(filters=[f("sum_insured", "gte", 7000), f("sum_insured", "gte", 5_000_000)]),
        plan(filters=[f("sum_insured", "gte", 75_000_000)]),
    ),
    (
        "월보험료 딱 5만원인 계약",
        plan(filters=[f("monthly_premium", "gte", 50_000)]),
        plan(filters=[f("monthly_premium", "eq", 50_000)]),
    ),
    (
        "월 보험료 10만원 안 되는 계약",
        plan(filters=[f("monthly_premium", "gte", 100_000)]),
        plan(filters=[f("monthly_premium", "lt", 100_000)]),
    ),
    (
        "contracts with a monthly premium of no more than 20,000",
        plan(filters=[f("monthly_premium", "gt", 20_000)]),
        plan(filters=[f("monthly_premium", "lte", 20_000)]),
    ),
    (
        "2024년 전에 가입한 고객",
        plan("customers", [f("joined_on", "between", ["2024-01-01", "2024-12-31"])]),
        plan("customers", [f("joined_on", "lt", "2024-01-01")]),
    ),
    (
        "2030년 이후 만기 계약",
        plan(filters=[f("end_date", "between", ["2030-01-01", "2030-12-31"])]),
        plan(filters=[f("end_date", "between", ["2030-01-01", "2999-12-31"])]),
    ),
    (
        "customers 60 and up",
        plan("customers", [f("age", "eq", 60)]),
        plan("customers", [f("age", "gte", 60)]),
    ),
    (
        "customers aged twenty-five or older",
        plan("customers", [f("age", "gte", 20), f("age", "gte", 5)]),
        plan("customers", [f("age", "gte", 25)]),
    ),
    (
        "2분기 미납 내역",
        plan(
            "premium_payments",
            [f("due_month", "between", ["2026-01", "2026-12"]), f("status", "eq", "미납")],
        ),  # fmt: skip
        plan(
            "premium_payments",
            [f("due_month", "between", ["2026-04", "2026-06"]), f("status", "eq", "미납")],
        ),  # fmt: skip
    ),
    (
        "지점마다 계약 수",
        plan(aggregates=[{"fn": "count", "field": None, "as": "count"}]),
        plan(
            group_by=["branch_id", "branch_name"],
            aggregates=[{"fn": "count", "field": None, "as": "count"}],
        ),  # fmt: skip
    ),
    (
        "납입 총액",
        plan("premium_payments", aggregates=[{"fn": "sum", "field": "amount", "as": "t"}]),
        plan(
            "premium_payments",
            [f("status", "eq", "납입")],
            aggregates=[{"fn": "sum", "field": "amount", "as": "t"}],
        ),  # fmt: skip
    ),
    (
        "살아있는 계약 보여줘",
        plan(),
        plan(filters=[f("status", "eq", "유지")]),
    ),
    (
        "이름에 '민' 들어가는 고객",
        plan("customers", [f("customer_name", "eq", "민")]),
        plan("customers", [f("customer_name", "contains", "민")]),
    ),
    (
        "만기가 가장 임박한 계약",
        plan(
            filters=[
                f("end_date", "between", ["2026-07-01", "2026-09-30"]),
                f("status", "eq", "유지"),
            ]
        ),  # fmt: skip
        plan(filters=[f("status", "eq", "유지")]),
    ),
    (
        "생일이 2월 11일인 고객",
        plan("customers", [f("birth_date", "month_day_between", ["02-01", "02-29"])]),
        plan("customers", [f("birth_date", "month_day_between", ["02-11", "02-11"])]),
    ),
    (
        "2월 11일생 고객",
        plan("customers", [f("joined_on", "between", ["2026-02-11", "2026-02-11"])]),
        plan("customers", [f("birth_date", "month_day_in", ["02-11"])]),
    ),
    (
        "2024년에 계약한 만기 끝난 계약",
        plan(
            filters=[
                f("end_date", "between", ["2024-01-01", "2024-12-31"]),
                f("status", "eq", "만기"),
            ]
        ),  # fmt: skip
        plan(
            filters=[
                f("start_date", "between", ["2024-01-01", "2024-12-31"]),
                f("status", "eq", "만기"),
            ]
        ),  # fmt: skip
    ),
    (
        "미납 금액이 4만원 이상인 미납 건",
        plan(
            "premium_payments",
            [f("status", "eq", "미납"), f("amount", "gte", 40_000)],
            aggregates=[{"fn": "sum", "field": "amount", "as": "t"}],
        ),  # fmt: skip
        plan("premium_payments", [f("status", "eq", "미납"), f("amount", "gte", 40_000)]),
    ),
]


@pytest.mark.parametrize(
    ("question", "misread", "right"), MISREADINGS, ids=[m[0] for m in MISREADINGS]
)
def test_a_misreading_is_caught_and_the_right_plan_passes(question, misread, right):
    assert disagrees(question, misread), "the misreading passed the second reading"
    assert disagrees(question, right) == []


@pytest.mark.parametrize(
    ("question", "invented"),
    [
        ("계약 목록", plan(filters=[f("start_date", "gte", "2026-04-01")])),  # a window
        ("고객 목록", plan("customers", [f("age", "gte", 65)])),  # an age
        ("계약 목록", plan(filters=[f("status", "eq", "해지")])),  # a status
        ("계약 목록", plan(filters=[f("monthly_premium", "gte", 50_000)])),  # an amount
        ("어르신 고객 목록", plan("customers", [f("customer_name", "eq", "어르신")])),  # a name
        ("어르신 고객 목록", plan("customers")),  # no age said: 어르신 is not one
    ],
)
def test_the_plan_carries_nothing_the_question_did_not_ask(question, invented):
    assert disagrees(question, invented)


def test_a_sum_compared_is_not_a_row_compared():
    question = "작년 하반기 납입 총액이 10만원 넘는 VIP 고객 몇 분?"
    rows = plan(
        "premium_payments",
        [f("due_month", "between", ["2025-07", "2025-12"]), f("grade", "eq", "VIP"),
         f("status", "eq", "납입"), f("amount", "gt", 100_000)],
        aggregates=[{"fn": "count", "field": None, "as": "count"}],
    )  # fmt: skip
    assert any("총액" in d.read_ko for d in disagrees(question, rows))


def test_the_maturing_convention_is_not_an_invented_window():
    soon = plan(filters=[f("end_date", "between", ["2026-07-01", "2026-09-30"]),
                         f("status", "eq", "유지")])  # fmt: skip
    assert disagrees("만기 예정 계약", soon) == []


@pytest.mark.parametrize(
    ("text", "value", "direction"),
    [
        ("천오백만원 이상", 15_000_000, UP),
        ("7천5백만원 이상", 75_000_000, UP),
        ("3만 5천원 넘지 않는", 35_000, DOWN),
        ("1억 5천만원 이하", 150_000_000, DOWN),
        ("오십만 원 밑으로", 500_000, DOWN),
        ("딱 5만원", 50_000, EXACT),
        ("1.2억 이상", 120_000_000, UP),
        ("over 30k", 30_000, UP),
        ("no less than 1.5M", 1_500_000, UP),
        ("no more than 20,000", 20_000, DOWN),
        ("twenty-five or older", 25, UP),
        ("스무 살 넘은", 20, UP),
    ],
)
def test_the_proof_reader_reads_quantities_by_grammar(text, value, direction):
    (q,) = quantities(text)
    assert (q.value, q.direction) == (value, direction)


def test_dates_and_ids_are_not_quantities():
    assert quantities("1987.02.11생 KB-P-001 C0001 2026-06-30") == []


# -- end to end: the answer is a refusal, nothing runs ---------------------------------------------


@pytest.fixture
def misread(monkeypatch):
    """The reader's plan for the next question replaced by `plan` (a reading to refuse)."""
    import kb.answering

    real = kb.answering.parse_prompt
    forced: dict = {}

    def parse(prompt, **kwargs):
        result = real(prompt, **kwargs)
        if prompt == forced.get("prompt"):
            result.plan = forced["plan"]
        return result

    monkeypatch.setattr(kb.answering, "parse_prompt", parse)

    def force(prompt, plan_):
        forced.update(prompt=prompt, plan=plan_)

    return force


def test_a_disagreement_is_refused_in_the_questions_language_with_a_checked_rephrasing(
    kb, misread, monkeypatch
):
    from kb.answering import QuestionRefused, answer_question

    ran = []
    import kb.answering

    monkeypatch.setattr(kb.answering, "execute", lambda *a, **k: ran.append(a))
    question = "보험료 천오백만원 이상 계약"
    misread(question, MISREADINGS[0][1])
    with pytest.raises(QuestionRefused) as refused:
        answer_question(stakeholder_id="KB-M-001", prompt=question, limit=10)
    assert refused.value.reason == "proof_disagrees"
    assert "'천오백만원'을 15,000,000원 이상으로 읽었습니다" in refused.value.message
    assert '"보험료 15,000,000원 이상 계약"' in refused.value.message  # checked by reading it
    assert ran == []


def test_an_english_disagreement_is_refused_in_english(kb, misread):
    from kb.answering import QuestionRefused, answer_question

    question = "contracts with a monthly premium of no more than 20,000"
    misread(question, plan(filters=[f("monthly_premium", "gt", 20_000)]))
    with pytest.raises(QuestionRefused) as refused:
        answer_question(stakeholder_id="KB-P-001", prompt=question, limit=10)
    assert refused.value.message.startswith("Not answered: two readings of the question disagree")
    assert "read '20,000' as 20,000 or less" in refused.value.message


def test_a_rephrasing_the_reader_would_misread_too_is_not_offered(kb, monkeypatch):
    """When the rewritten question still disagrees, the refusal offers no question at all."""
    import kb.answering
    from kb.answering import QuestionRefused, answer_question

    real = kb.answering.parse_prompt

    def always_wrong(prompt, **kwargs):
        result = real(prompt, **kwargs)
        result.plan = MISREADINGS[0][1]
        return result

    monkeypatch.setattr(kb.answering, "parse_prompt", always_wrong)
    with pytest.raises(QuestionRefused) as refused:
        answer_question(stakeholder_id="KB-M-001", prompt=MISREADINGS[0][0], limit=10)
    assert "이렇게 물어보면" not in refused.value.message
    assert "숫자로" in refused.value.message


def test_the_reader_now_reads_each_misreading_as_the_proof_does(kb):
    """The reader's own answer to every question above passes the second reading."""
    from kb.answering import QuestionRefused, answer_question

    for question, _, _ in MISREADINGS:
        try:
            answer = answer_question(stakeholder_id="KB-M-001", prompt=question, limit=100)
        except QuestionRefused as exc:
            assert exc.reason != "proof_disagrees", (question, exc.message)
            continue
        assert disagrees(question, answer["interpretation"]["plan"]) == [], question


def test_money_received_is_paid_rows_and_the_answer_says_so(kb):
    """The catalogue's convention, carried by the reader and stated in the answer's notes."""
    from kb.answering import answer_question
    from kb.catalogue import PAID_STATUS

    answer = answer_question(
        stakeholder_id="KB-M-001", prompt="지금까지 받은 보험료 합계", limit=10
    )
    conditions = answer["interpretation"]["plan"]["filters"]
    assert {"field": "status", "op": "eq", "value": PAID_STATUS} in conditions
    assert any("납입된 건만" in note for note in answer["interpretation"]["notes"])


def test_a_count_of_related_rows_and_a_region_grouping_are_checked_too():
    counted = plan("customers", related=[{"entity": "contracts", "filters": [], "exists": True,
                                          "at_least": 2}])  # fmt: skip
    assert disagrees("계약이 2건 이상인 고객", counted) == []
    assert disagrees("계약이 3건 이상인 고객", counted)  # the count is the question's
    assert disagrees("계약이 있는 고객", counted)  # a count nobody asked for
    by_region = plan("customers", group_by=["region"],
                     aggregates=[{"fn": "count", "field": None, "as": "count"}])  # fmt: skip
    assert disagrees("지역별 고객 수", by_region) == []
    assert disagrees("지점별 고객 수", by_region)
