"""One question goes one way: the asker is taken as given, the plan is parsed and policed once,
and the stakeholder is read once more only by the database-side recheck as the rows are read."""

import re
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from kb import answering, policy, vpd
from kb.models import Stakeholder
from kb.policy import PolicyRefused, StakeholderSnapshot
from kb.questions import Question
from kb.selectors import stakeholder_get

STAKEHOLDER_TABLE = Stakeholder._meta.db_table


def snapshot(stakeholder_id: str) -> StakeholderSnapshot:
    return StakeholderSnapshot.of(stakeholder_get(stakeholder_id))


def stakeholder_reads(queries) -> list[str]:
    """Statements that look a stakeholder up by its id (a data query may join the table for
    names, on its key, but never by a value)."""
    by_id = re.compile(r"stakeholder_id\"?\s*=\s*'")
    return [q["sql"] for q in queries if STAKEHOLDER_TABLE in q["sql"] and by_id.search(q["sql"])]


@pytest.mark.parametrize(
    "stakeholder_id, prompt",
    [
        ("KB-P-001", "담당 고객의 보험료 상세를 보여줘"),
        ("KB-H-001", "설계사별 고객 수"),
        ("KB-M-001", "customers in my branch"),
    ],
)
def test_a_question_is_parsed_policed_and_run_once(kb, stakeholder_id, prompt):
    asker = snapshot(stakeholder_id)
    answering.current_vocabulary()  # loaded once per process, not per question
    with (
        mock.patch.object(answering, "plan_parse", wraps=answering.plan_parse) as parsed,
        mock.patch.object(answering, "police", wraps=policy.police) as policed,
        mock.patch.object(answering, "execute", wraps=vpd.execute) as executed,
        CaptureQueriesContext(connection) as queries,
    ):
        answer = answering.answer(asker, Question.asked(prompt, 10))

    assert answer["stakeholder"]["id"] == stakeholder_id
    assert (parsed.call_count, policed.call_count, executed.call_count) == (1, 1, 1)
    # The only read of the stakeholder is the recheck inside the reading transaction.
    assert len(stakeholder_reads(queries.captured_queries)) == 1


def test_the_recheck_refuses_a_snapshot_suspended_since_it_was_taken(kb):
    asker = snapshot("KB-P-002")
    Stakeholder.objects.filter(pk="KB-P-002").update(status="suspended")

    with pytest.raises(PolicyRefused) as refused:
        answering.answer(asker, Question.asked("담당 고객 목록", 10))
    assert refused.value.reason == "suspended"


def test_an_asker_the_snapshot_bars_is_refused_before_any_query(kb, django_assert_num_queries):
    suspended = snapshot("KB-P-099")
    answering.current_vocabulary()

    with django_assert_num_queries(0), pytest.raises(PolicyRefused) as refused:
        answering.answer(suspended, Question.asked("담당 고객 목록", 10))
    assert refused.value.reason == "suspended"


def test_the_row_scope_is_data_and_the_orm_filter_is_built_from_it(kb):
    planner, manager, analyst = (snapshot(i) for i in ("KB-P-001", "KB-M-001", "KB-H-001"))
    plan = vpd.plan_parse({"entity": "contracts"})

    assert policy.police(plan, planner).rows == policy.RowFilter(
        ("customer__planner_id",), ("KB-P-001",)
    )
    assert policy.police(plan, manager).rows.values == (manager.branch_id,)
    assert policy.police(plan, analyst).rows == policy.RowFilter((), ())
    q = policy.visible_customers_q(planner, customer_path="customer")
    assert q.children == [("customer__planner_id", "KB-P-001")]


def test_a_question_limit_is_brought_into_the_catalogues_range():
    assert Question.asked("x", 1000).limit == 100
    assert Question.asked("x", 0).limit == 1
    assert Question.asked("x").limit == 50
    assert Question.asked("customers").language == "en"
    assert Question.asked("고객").language == "ko"
