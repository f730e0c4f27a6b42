"""Plans that keep a row by the rows it has, or lacks ("미납이 없는 고객", "유지 계약이 있는 고객"):
their answers against the CSV files, on every role, and their refusals."""

import pytest

from kb.models import Stakeholder
from kb.plans import PlanError, plan_parse
from kb.vpd import MaskedColumnError, execute_plan
from tests.kb.selectai_suite import HQ, M1, P1, contract_view, customer_view, payment_view

ASKERS = [P1, M1, HQ]


def ids(answer, key):
    assert not answer["truncated"]
    return {row[key] for row in answer["rows"]}


def plan(entity, related, **extra):
    return {"entity": entity, "limit": 100, "related": related, **extra}


def customers_with(rows, pred):
    return {r["customer_id"] for r in rows if pred(r)}


@pytest.mark.parametrize("sid", ASKERS)
def test_customers_with_no_unpaid_premium_are_the_complement(kb, sid):
    asker = Stakeholder.objects.get(pk=sid)
    related = [{"entity": "premium_payments", "exists": False,
                "filters": [{"field": "status", "op": "eq", "value": "미납"}]}]  # fmt: skip
    answer = execute_plan(
        plan("customers", related, aggregates=[{"fn": "count", "field": None, "as": "count"}]),
        stakeholder=asker,
    )
    unpaid = customers_with(payment_view(sid), lambda p: p["status"] == "미납")
    everyone = {c["customer_id"] for c in customer_view(sid)}
    assert answer["rows"] == [{"count": len(everyone - unpaid)}]
    assert everyone - unpaid and unpaid  # both sides hold someone: the test can fail


@pytest.mark.parametrize("sid", ASKERS)
def test_customers_with_an_in_force_cancer_contract(kb, sid):
    asker = Stakeholder.objects.get(pk=sid)
    related = [{"entity": "contracts", "exists": True, "filters": [
        {"field": "product_code", "op": "eq", "value": "HLTH-02"},
        {"field": "status", "op": "eq", "value": "유지"},
    ]}]  # fmt: skip
    answer = execute_plan(plan("customers", related), stakeholder=asker)
    want = customers_with(
        contract_view(sid), lambda k: k["product_code"] == "HLTH-02" and k["status"] == "유지"
    )
    got = ids(answer, "customer_id")
    assert got == want or (len(want) > 100 and got < want)


@pytest.mark.parametrize("sid", ASKERS)
def test_contracts_with_no_unpaid_premium_in_the_last_three_months(kb, sid):
    asker = Stakeholder.objects.get(pk=sid)
    related = [{"entity": "premium_payments", "exists": False, "filters": [
        {"field": "status", "op": "eq", "value": "미납"},
        {"field": "due_month", "op": "between", "value": ["2026-04", "2026-06"]},
    ]}]  # fmt: skip
    answer = execute_plan(
        plan("contracts", related, aggregates=[{"fn": "count", "field": None, "as": "count"}]),
        stakeholder=asker,
    )
    late = {
        p["contract_id"]
        for p in payment_view(sid)
        if p["status"] == "미납" and "2026-04" <= p["due_month"] <= "2026-06"
    }
    contracts = {k["contract_id"] for k in contract_view(sid)}
    assert answer["rows"] == [{"count": len(contracts - late)}]


def test_a_related_condition_on_a_column_the_asker_sees_masked_is_refused(kb):
    analyst = Stakeholder.objects.get(pk=HQ)
    related = [{"entity": "contracts", "exists": True,
                "filters": [{"field": "rrn", "op": "startswith", "value": "87"}]}]  # fmt: skip
    with pytest.raises(PlanError):  # contracts carry no rrn at all
        execute_plan(plan("customers", related), stakeholder=analyst)
    related[0]["filters"] = [{"field": "customer_name", "op": "startswith", "value": "김"}]
    with pytest.raises(MaskedColumnError):
        execute_plan(plan("customers", related), stakeholder=analyst)


@pytest.mark.parametrize(
    "related",
    [
        [{"entity": "customers", "filters": [], "exists": True}],  # rows a payment cannot have
        [{"entity": "contracts", "filters": [], "exists": "no"}],
        [{"entity": "contracts", "filters": [], "exists": True, "sql": "1=1"}],
        [{"entity": "contracts", "filters": [{"field": "nope", "op": "eq", "value": 1}]}],
    ],
)
def test_a_malformed_related_condition_is_a_plan_error(related):
    entity = "premium_payments" if related[0]["entity"] == "customers" else "customers"
    with pytest.raises(PlanError):
        plan_parse(plan(entity, related))


def test_the_reader_links_exactly_the_rows_a_plan_can_compile():
    from kb.plans import RELATED_PATHS
    from kb.selectai.related import _RELATED_LINKS

    assert set(RELATED_PATHS) == _RELATED_LINKS


@pytest.mark.parametrize("sid", ASKERS)
@pytest.mark.parametrize("at_least", [1, 2, 3])
def test_customers_with_at_least_n_rows_are_counted_over_their_own_rows(kb, sid, at_least):
    """ "유지 계약이 2건 이상인 고객": a count over the customer's own rows, in scope."""
    from collections import Counter

    asker = Stakeholder.objects.get(pk=sid)
    related = [{"entity": "contracts", "exists": True, "at_least": at_least,
                "filters": [{"field": "status", "op": "eq", "value": "유지"}]}]  # fmt: skip
    counted = [{"fn": "count", "field": None, "as": "count"}]
    answer = execute_plan(plan("customers", related, aggregates=counted), stakeholder=asker)
    held = Counter(k["customer_id"] for k in contract_view(sid) if k["status"] == "유지")
    expected = {c for c, n in held.items() if n >= at_least}
    assert answer["rows"] == [{"count": len(expected)}]
    assert expected  # someone holds that many: the test can fail


@pytest.mark.parametrize(
    "related",
    [
        {"entity": "contracts", "exists": True, "at_least": 0},
        {"entity": "contracts", "exists": True, "at_least": "2"},
        {"entity": "contracts", "exists": True, "at_least": True},
        {"entity": "contracts", "exists": False, "at_least": 2},
        {"entity": "contracts", "exists": True, "at_least": 10**6},
    ],
)
def test_a_count_of_related_rows_is_a_small_whole_number_of_rows_that_exist(related):
    with pytest.raises(PlanError):
        plan_parse(plan("customers", [related]))


def test_the_reader_counts_a_customers_rows(kb):
    from kb.answering import answer_question

    answer = answer_question(stakeholder_id=M1, prompt="계약이 2건 이상인 고객", limit=100)
    (related,) = answer["interpretation"]["plan"]["related"]
    assert (related["entity"], related["at_least"]) == ("contracts", 2)
    from collections import Counter

    held = Counter(k["customer_id"] for k in contract_view(M1))
    assert ids(answer, "customer_id") == {c for c, n in held.items() if n >= 2}
