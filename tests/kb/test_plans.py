"""Query plans: the parser's contract is validated strictly, and hostile plans are refused or
harmless. Validation tests need no database; the executing ones run on both databases."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kb.models import Customer
from kb.plans import MAX_IN_VALUES, OPS, AgeBand, PlanError, plan_parse
from kb.selectors import stakeholder_get
from kb.vpd import MaskedColumnError, execute_plan
from tests.kb.conftest import AS_OF, demo_rows, expected_customer_ids

COUNT = [{"fn": "count", "field": None, "as": "count"}]


def refused(plan, code=None) -> PlanError:
    with pytest.raises(PlanError) as error:
        plan_parse(plan)
    if code:
        assert error.value.code == code
    return error.value


# --- the contract ------------------------------------------------------------------------------


def test_a_full_plan_in_the_parsers_shape_is_accepted_and_normalised():
    plan = plan_parse(
        {
            "entity": "premium_payments",
            "fields": [],
            "filters": [
                {"field": "status", "op": "eq", "value": "미납"},
                {"field": "due_month", "op": "between", "value": ["2026-04", "2026-06"]},
                {"field": "due_date", "op": "lte", "value": "2026-06-30"},
                {"field": "amount", "op": "gte", "value": 50000},
                {"field": "product_code", "op": "in", "value": ["AUTO-01", "HLTH-01"]},
            ],
            "group_by": ["branch_name"],
            "aggregates": [
                {"fn": "count", "field": None, "as": "count"},
                {"fn": "sum", "field": "amount", "as": "total_amount"},
            ],
            "order_by": [{"field": "total_amount", "direction": "desc"}],
            "limit": 10,
        }
    )

    assert plan.grouped
    assert plan.as_dict()["filters"][2] == {"field": "due_date", "op": "lte", "value": "2026-06-30"}
    assert plan.as_dict()["order_by"] == [{"field": "total_amount", "direction": "desc"}]


def test_missing_parts_take_their_defaults():
    plan = plan_parse({"entity": "customers"})

    assert (plan.fields, plan.filters, plan.group_by, plan.aggregates, plan.limit) == (
        (),
        (),
        (),
        (),
        20,
    )


@pytest.mark.parametrize(("raw", "clamped"), [(10_000, 100), (100, 100), (0, 1), (-5, 1), (7, 7)])
def test_limits_are_clamped_to_one_to_a_hundred(raw, clamped):
    assert plan_parse({"entity": "contracts", "limit": raw}).limit == clamped


@pytest.mark.parametrize("raw", ["10", 10.0, True, [10], {"n": 1}])
def test_a_limit_that_is_not_an_integer_is_refused(raw):
    refused({"entity": "contracts", "limit": raw}, "bad_limit")


def test_aggregates_without_an_alias_get_the_parsers_names():
    plan = plan_parse(
        {
            "entity": "contracts",
            "aggregates": [
                {"fn": "count", "field": None},
                {"fn": "sum", "field": "monthly_premium"},
                {"fn": "avg", "field": "sum_insured"},
                {"fn": "max", "field": "end_date"},
            ],
        }
    )

    assert [a.alias for a in plan.aggregates] == [
        "count",
        "total_monthly_premium",
        "avg_sum_insured",
        "max_end_date",
    ]


def test_age_groups_are_read_as_decades_and_sixty_plus_is_open_ended():
    plan = plan_parse(
        {
            "entity": "customers",
            "filters": [{"field": "age_group", "op": "in", "value": ["30대", "60대 이상"]}],
        }
    )

    assert plan.filters[0].value == (AgeBand(30, 39), AgeBand(60, None))


# --- refused with a clear message -------------------------------------------------------------


def test_an_unknown_entity_is_refused():
    error = refused({"entity": "kb_customer; DROP TABLE kb_customer"}, "unknown_entity")

    assert "알 수 없는 조회 대상" in error.message


@pytest.mark.parametrize(
    "plan",
    [
        {"entity": "customers", "fields": ["password"]},
        {"entity": "customers", "fields": ["customer_name) FROM kb_customer --"]},
        {"entity": "contracts", "filters": [{"field": "rrn", "op": "eq", "value": "x"}]},
        {"entity": "customers", "group_by": ["amount"]},
        {"entity": "customers", "order_by": [{"field": "1", "direction": "asc"}]},
        {"entity": "customers", "aggregates": [{"fn": "sum", "field": "term_years"}]},
        {"entity": "customers", "fields": [["customer_name"]]},
    ],
)
def test_a_plan_naming_an_unknown_field_is_refused(plan):
    error = refused(plan, "unknown_field")

    assert "없는 필드" in error.message


@pytest.mark.parametrize("op", ["like", "regex", "raw", "= 1 OR 1=1", None, "EQ"])
def test_an_unknown_operator_is_refused(op):
    error = refused(
        {"entity": "customers", "filters": [{"field": "grade", "op": op, "value": "VIP"}]},
        "unknown_op",
    )

    assert "알 수 없는 연산자" in error.message


@pytest.mark.parametrize(
    ("field", "op", "value"),
    [
        ("amount", "eq", "100000"),
        ("amount", "gte", True),
        ("amount", "eq", 1.5),
        ("amount", "eq", 10**18),
        ("amount", "between", [1]),
        ("amount", "between", [5, 1]),
        ("amount", "in", []),
        ("amount", "in", "1,2,3"),
        ("amount", "contains", 1),
        ("due_date", "eq", "2026-13-01"),
        ("due_date", "eq", "20260601"),
        ("due_date", "eq", "2026-06-01' OR '1'='1"),
        ("due_month", "eq", "2026-6"),
        ("due_month", "eq", "2026-06-01"),
        ("status", "eq", ["미납"]),
        ("status", "eq", {"$ne": None}),
        ("status", "eq", None),
        ("status", "eq", "미납\x00"),
        ("status", "eq", "x" * 101),
    ],
)
def test_a_value_of_the_wrong_type_is_refused(field, op, value):
    refused({"entity": "premium_payments", "filters": [{"field": field, "op": op, "value": value}]})


def test_a_huge_in_list_is_refused_and_a_full_one_is_not():
    ids = [f"C{n:04d}" for n in range(MAX_IN_VALUES + 1)]

    refused(
        {"entity": "customers", "filters": [{"field": "customer_id", "op": "in", "value": ids}]},
        "too_many",
    )
    plan_parse(
        {"entity": "customers", "filters": [{"field": "customer_id", "op": "in", "value": ids[1:]}]}
    )


def test_too_many_filters_are_refused():
    filters = [{"field": "grade", "op": "ne", "value": str(n)} for n in range(21)]

    refused({"entity": "customers", "filters": filters}, "too_many")


@pytest.mark.parametrize(
    "plan",
    [
        ["entity", "customers"],
        "SELECT * FROM kb_customer",
        {"entity": "customers", "sql": "SELECT 1"},
        {"entity": "customers", "filters": [{"field": "grade", "op": "eq", "value": 1, "x": 1}]},
        {"entity": "customers", "filters": {"grade": "VIP"}},
        {"entity": "customers", "aggregates": [{"fn": "median", "field": "age"}]},
        {"entity": "customers", "aggregates": [{"fn": "sum", "field": None}]},
        {"entity": "customers", "aggregates": [{"fn": "sum", "field": "grade"}]},
        {"entity": "customers", "aggregates": [{"fn": "count", "as": "x; DROP TABLE y"}]},
        {"entity": "customers", "aggregates": [{"fn": "count", "as": "grade"}]},
        {"entity": "customers", "aggregates": [{"fn": "count"}, {"fn": "count"}]},
        {"entity": "customers", "order_by": [{"field": "grade", "direction": "sideways"}]},
        {"entity": "customers", "group_by": ["grade"], "fields": ["customer_name"]},
        {"entity": "customers", "group_by": ["grade"], "order_by": [{"field": "customer_id"}]},
        {"entity": "contracts", "order_by": [{"field": "count", "direction": "desc"}]},
    ],
)
def test_malformed_plans_are_refused(plan):
    assert refused(plan).message


# --- executed: harmless or refused ------------------------------------------------------------


def test_sql_fragments_in_values_are_only_ever_compared_as_text(kb):
    hq = stakeholder_get("KB-H-001")
    for value in ("' OR 1=1 --", "x'); DROP TABLE kb_customer; --", "%", "_", "\\"):
        answer = execute_plan(
            {"entity": "customers", "filters": [{"field": "grade", "op": "eq", "value": value}]},
            stakeholder=hq,
        )
        assert answer["rows"] == []
        answer = execute_plan(
            {
                "entity": "customers",
                "filters": [{"field": "grade", "op": "contains", "value": value}],
            },
            stakeholder=hq,
        )
        assert answer["rows"] == []
    assert Customer.objects.count() == 214


def test_a_limit_of_ten_thousand_returns_a_hundred_rows_and_says_so(kb):
    answer = execute_plan(
        {"entity": "premium_payments", "limit": 10_000}, stakeholder=stakeholder_get("KB-H-001")
    )

    assert (answer["limit"], answer["row_count"], answer["truncated"]) == (100, 100, True)
    assert answer["interpretation"]["plan"]["limit"] == 100


@pytest.mark.parametrize("limit", [0, -5])
def test_a_limit_below_one_returns_one_row(kb, limit):
    answer = execute_plan(
        {"entity": "contracts", "limit": limit}, stakeholder=stakeholder_get("KB-P-001")
    )

    assert (answer["limit"], answer["row_count"], answer["truncated"]) == (1, 1, True)


def test_truncated_is_false_when_the_rows_fit_exactly(kb):
    planner = stakeholder_get("KB-P-001")
    size = len(expected_customer_ids("KB-P-001"))

    answer = execute_plan({"entity": "customers", "limit": size}, stakeholder=planner)

    assert (answer["row_count"], answer["truncated"]) == (size, False)


@pytest.mark.parametrize(
    ("stakeholder_id", "plan"),
    [
        ("KB-H-001", {"filters": [{"field": "rrn", "op": "contains", "value": "870211"}]}),
        ("KB-H-001", {"filters": [{"field": "phone", "op": "eq", "value": "010-8962-2842"}]}),
        ("KB-H-001", {"filters": [{"field": "customer_name", "op": "eq", "value": "신하은"}]}),
        ("KB-H-001", {"filters": [{"field": "birth_date", "op": "gte", "value": "1987-02-11"}]}),
        ("KB-H-001", {"order_by": [{"field": "customer_name", "direction": "asc"}]}),
        ("KB-H-001", {"order_by": [{"field": "birth_date", "direction": "asc"}]}),
        ("KB-H-001", {"group_by": ["phone"], "aggregates": COUNT}),
        ("KB-H-001", {"aggregates": [{"fn": "min", "field": "birth_date"}]}),
        ("KB-H-001", {"aggregates": [{"fn": "count", "field": "rrn"}]}),
        ("KB-P-001", {"filters": [{"field": "rrn", "op": "between", "value": ["8", "9"]}]}),
        ("KB-P-001", {"order_by": [{"field": "rrn", "direction": "desc"}]}),
        ("KB-M-001", {"filters": [{"field": "phone", "op": "contains", "value": "8962"}]}),
        ("KB-M-001", {"group_by": ["rrn"]}),
    ],
)
def test_using_a_masked_column_to_infer_its_value_is_refused(kb, stakeholder_id, plan):
    with pytest.raises(MaskedColumnError) as error:
        execute_plan({"entity": "customers", **plan}, stakeholder=stakeholder_get(stakeholder_id))

    assert "가려져 있어" in error.value.message


def test_masked_customer_names_cannot_be_filtered_through_contracts_either(kb):
    with pytest.raises(MaskedColumnError):
        execute_plan(
            {
                "entity": "premium_payments",
                "filters": [{"field": "customer_name", "op": "contains", "value": "신"}],
            },
            stakeholder=stakeholder_get("KB-H-001"),
        )


def test_a_planner_may_filter_on_what_the_planner_sees_in_full(kb):
    answer = execute_plan(
        {
            "entity": "customers",
            "fields": ["customer_name", "phone"],
            "filters": [{"field": "customer_name", "op": "eq", "value": "신하은"}],
        },
        stakeholder=stakeholder_get("KB-P-001"),
    )

    assert answer["rows"] == [
        {"customer_id": "C0001", "customer_name": "신하은", "phone": "010-8962-2842"}
    ]


def test_hq_ages_come_from_the_birth_year_so_they_reveal_no_birthday(kb):
    # Born 1987: C0001 on 02-11 (39 at the as-of date), C0002 on 11-01 (still 38). HQ sees both
    # as 2026 - 1987 = 39, and filtering on age 38 or 39 cannot tell them apart.
    hq = stakeholder_get("KB-H-001")
    born_1987 = {c["customer_id"] for c in demo_rows("customers") if c["birth_date"][:4] == "1987"}

    def ids(age):
        answer = execute_plan(
            {
                "entity": "customers",
                "fields": ["age"],
                "filters": [{"field": "age", "op": "eq", "value": age}],
                "limit": 100,
            },
            stakeholder=hq,
        )
        return {row["customer_id"] for row in answer["rows"]}

    assert {"C0001", "C0002"} <= born_1987
    assert ids(39) == born_1987
    assert not ids(38) & born_1987


def test_a_planner_sees_exact_ages(kb):
    answer = execute_plan(
        {
            "entity": "customers",
            "fields": ["age", "age_group"],
            "filters": [{"field": "customer_id", "op": "in", "value": ["C0001", "C0002"]}],
        },
        stakeholder=stakeholder_get("KB-P-001"),
    )

    assert answer["rows"] == [
        {"customer_id": "C0001", "age": 39, "age_group": "30대"},
        {"customer_id": "C0002", "age": 38, "age_group": "30대"},
    ]


def test_age_group_filters_match_the_decade_and_sixty_plus_everyone_older(kb):
    planner = stakeholder_get("KB-P-001")
    mine = [c for c in demo_rows("customers") if c["planner_id"] == "KB-P-001"]

    def age(c):
        y, m, d = (int(x) for x in c["birth_date"].split("-"))
        return AS_OF.year - y - ((m, d) > (AS_OF.month, AS_OF.day))

    def count(value, op="eq"):
        answer = execute_plan(
            {
                "entity": "customers",
                "filters": [{"field": "age_group", "op": op, "value": value}],
                "aggregates": COUNT,
            },
            stakeholder=planner,
        )
        return answer["rows"][0]["count"]

    assert count("30대") == sum(30 <= age(c) <= 39 for c in mine)
    assert count("60대 이상") == sum(age(c) >= 60 for c in mine)
    assert count("40대", "gte") == sum(age(c) >= 40 for c in mine)
    assert count("40대", "lt") == sum(age(c) < 40 for c in mine)
    assert count(["30대", "50대"], "between") == sum(30 <= age(c) <= 59 for c in mine)


def test_row_answers_always_carry_the_natural_key(kb):
    answer = execute_plan(
        {"entity": "premium_payments", "fields": ["amount"], "limit": 2},
        stakeholder=stakeholder_get("KB-P-001"),
    )

    assert [c["name"] for c in answer["columns"]] == ["payment_id", "amount"]
    assert all(set(row) == {"payment_id", "amount"} for row in answer["rows"])


def test_default_columns_leave_out_what_the_role_may_never_see(kb):
    answer = execute_plan({"entity": "customers"}, stakeholder=stakeholder_get("KB-H-001"))

    names = [c["name"] for c in answer["columns"]]
    assert "phone" not in names and "rrn" not in names
    assert names[0] == "customer_id"
    assert all(c["label"] for c in answer["columns"])


def test_ties_in_a_sort_are_broken_by_the_natural_key(kb):
    answer = execute_plan(
        {
            "entity": "contracts",
            "fields": ["status"],
            "order_by": [{"field": "status", "direction": "desc"}],
            "limit": 100,
        },
        stakeholder=stakeholder_get("KB-M-001"),
    )

    keys = [(row["status"], row["contract_id"]) for row in answer["rows"]]
    assert len({status for status, _id in keys}) > 1
    for before, after in zip(keys, keys[1:], strict=False):
        assert before[0] > after[0] or (before[0] == after[0] and before[1] < after[1])


def test_the_interpretation_is_passed_through_with_the_normalised_plan(kb):
    answer = execute_plan(
        {"entity": "contracts", "limit": 500},
        stakeholder=stakeholder_get("KB-P-001"),
        interpretation={"summary": "담당 계약 목록"},
    )

    assert answer["interpretation"]["summary"] == "담당 계약 목록"
    assert answer["interpretation"]["plan"]["limit"] == 100


# --- fuzzing: anything JSON-shaped is a Plan or a PlanError, never a crash --------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_field = st.sampled_from(["grade", "amount", "due_month", "age", "age_group", "rrn", "zzz"])
_filter = st.fixed_dictionaries(
    {"field": _field, "op": st.sampled_from([*OPS, "like"]), "value": _json}
)


@settings(max_examples=150, deadline=None)
@given(
    entity=st.sampled_from(["customers", "contracts", "premium_payments", "x"]),
    filters=st.lists(_filter, max_size=3),
    group_by=st.lists(_field, max_size=2),
    limit=_json,
    extra=_json,
)
def test_any_json_plan_is_either_valid_or_refused_with_a_plan_error(
    entity, filters, group_by, limit, extra
):
    raw = {"entity": entity, "filters": filters, "group_by": group_by, "limit": limit}
    for candidate in (raw, extra, {**raw, "fields": extra}, {**raw, "aggregates": extra}):
        try:
            plan = plan_parse(candidate)
        except PlanError as error:
            assert error.message
        else:
            assert 1 <= plan.limit <= 100
            json.dumps(plan.as_dict())


def test_a_plan_object_built_by_hand_is_validated_and_clamped_like_a_dict(kb):
    from kb.plans import Plan

    answer = execute_plan(
        Plan(entity="premium_payments", limit=1_000_000), stakeholder=stakeholder_get("KB-H-001")
    )
    assert answer["limit"] == answer["row_count"] == 100
    with pytest.raises(PlanError):
        execute_plan(
            Plan(entity="customers", fields=("password",)), stakeholder=stakeholder_get("KB-H-001")
        )
