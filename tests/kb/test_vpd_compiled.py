"""The compiled data layer (one SQL statement per plan shape) answers exactly as the ORM path did.

The reference below is kb.vpd's former queryset code, kept here unchanged apart from its names: it
builds a Django queryset per request from the same plan, under the same policy filter and reader
context. Every generated plan (each entity, field, operator, kind, aggregate, grouping, sort and
role) must give the same answer both ways, or the same refusal. Runs on SQLite and, in the
PostgreSQL pass, on PostgreSQL (where reads also run under row-level security).
"""

from __future__ import annotations

import random

import pytest
from django.core.exceptions import FieldDoesNotExist
from django.db.models import (
    Avg,
    Case,
    Count,
    ExpressionWrapper,
    F,
    IntegerField,
    Max,
    Min,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, ExtractYear

from kb import vpd
from kb.answers import answer_build, json_value
from kb.plans import ENTITIES, AgeBand, Kind, PlanError, plan_parse
from kb.policy import COMPARABLE_MASKS, Mask, column_mask, mask_value, visible_customers_q
from kb.selectors import kb_as_of_date, stakeholder_get
from tests.kb.truth import CUSTOMERS, age, shown, visible_customers

ROLES = {"planner": "KB-P-001", "branch_manager": "KB-M-001", "hq_analyst": "KB-H-001"}
STAKEHOLDERS = [*ROLES.values(), "KB-P-003", "KB-M-002"]

# --- the reference: the ORM path --------------------------------------------------------------

AGE, AGE_GROUP = "hb_age", "hb_age_group"
_AGGREGATES = {"count": Count, "sum": Sum, "avg": Avg, "min": Min, "max": Max}


def orm_execute_plan(raw: dict, *, stakeholder) -> dict:
    parsed = plan_parse(raw)
    masks = vpd._column_masks(parsed, stakeholder.role)
    columns = vpd._output_columns(parsed, masks)
    as_of = kb_as_of_date()
    with vpd._reader_context(stakeholder):
        records, truncated = _orm_fetch(
            parsed,
            stakeholder=stakeholder,
            masks=masks,
            as_of=as_of,
            output=[name for name, _label in columns if name in parsed.spec.fields],
        )
    spec = parsed.spec
    aggregate_fields = {agg.alias: agg.field for agg in parsed.aggregates}
    cells = [
        (
            name,
            _ref(parsed, name),
            Mask.FULL if name in aggregate_fields else masks[name],
            name in spec.fields and spec.fields[name].kind is Kind.AGE_GROUP,
        )
        for name, _label in columns
    ]
    rows = []
    for record in records:
        row = {}
        for name, key, mask, age_group in cells:
            value = record[key]
            if age_group and value is not None:
                value = f"{value}대"
            row[name] = json_value(value if mask is Mask.FULL else mask_value(mask, value))
        rows.append(row)
    masked = [
        name
        for name, _label in columns
        if masks.get(aggregate_fields.get(name) or name, Mask.FULL) is not Mask.FULL
    ]
    return answer_build(
        columns=columns,
        rows=rows,
        truncated=truncated,
        limit=parsed.limit,
        masked_columns=masked,
        as_of=as_of,
        stakeholder_id=stakeholder.pk,
        role=stakeholder.role,
        branch_id=stakeholder.branch_id,
        interpretation={"plan": parsed.as_dict()},
    )


def _ref(plan, name: str) -> str:
    spec = plan.spec
    if name not in spec.fields:
        return f"hb_agg_{[agg.alias for agg in plan.aggregates].index(name)}"
    kind = spec.fields[name].kind
    if kind is Kind.AGE:
        return AGE
    if kind is Kind.AGE_GROUP:
        return AGE_GROUP
    return spec.fields[name].path


def _filter_ref(model, ref: str) -> str:
    """The one change to the former code: a foreign key's column is filtered through the key it
    points to (the same value). The ORM refuses range and icontains on a foreign key (FieldError),
    so the former path answered `customer_id between ...` on contracts with an engine error."""
    parts = ref.split("__")
    for part in parts[:-1]:
        try:
            model = model._meta.get_field(part).related_model
        except FieldDoesNotExist:
            return ref  # an annotation (age)
    try:
        field = model._meta.get_field(parts[-1])
    except FieldDoesNotExist:
        return ref
    if field.many_to_one:
        return "__".join([*parts[:-1], field.name, field.target_field.name])
    return ref


def _age_expression(path: str, as_of, *, year_only: bool):
    age = Value(as_of.year) - Cast(ExtractYear(path), IntegerField())
    if not year_only:
        birthday_ahead = Q(**{f"{path}__month__gt": as_of.month}) | Q(
            **{f"{path}__month": as_of.month, f"{path}__day__gt": as_of.day}
        )
        age = age - Case(When(birthday_ahead, then=Value(1)), default=Value(0))
    return ExpressionWrapper(age, output_field=IntegerField())


def _orm_fetch(plan, *, stakeholder, masks, as_of, output):
    spec = plan.spec
    qs = spec.model.objects.filter(
        visible_customers_q(stakeholder, customer_path=spec.customer_path)
    )
    needed = dict.fromkeys([*output, *plan.referenced_fields()])
    derived = [spec.fields[name] for name in needed if spec.fields[name].derived]
    if derived:
        year_only = any(masks[f.name] is Mask.FROM_BIRTH_YEAR for f in derived)
        qs = qs.annotate(**{AGE: _age_expression(derived[0].path, as_of, year_only=year_only)})
        qs = qs.annotate(
            **{
                AGE_GROUP: ExpressionWrapper(
                    F(AGE) / Value(10) * Value(10), output_field=IntegerField()
                )
            }
        )
    for item in plan.filters:
        ref = _filter_ref(spec.model, _ref(plan, item.field))
        qs = qs.filter(_filter_q(item, ref, spec.fields[item.field].kind))
    aggregates = {
        _ref(plan, agg.alias): _AGGREGATES[agg.fn](_ref(plan, agg.field) if agg.field else "*")
        for agg in plan.aggregates
    }
    if plan.grouped and not plan.group_by:
        return [qs.aggregate(**aggregates)], False
    orders = [
        F(_ref(plan, order.key)).desc(nulls_last=True)
        if order.descending
        else F(_ref(plan, order.key)).asc(nulls_last=True)
        for order in plan.order_by
    ]
    if plan.grouped:
        keys = [_ref(plan, name) for name in plan.group_by]
        qs = qs.values(*keys)
        qs = qs.annotate(**aggregates) if aggregates else qs.distinct()
        qs = qs.order_by(*orders, *[F(key).asc(nulls_last=True) for key in keys])
    else:
        refs = dict.fromkeys(_ref(plan, name) for name in output)
        qs = qs.order_by(*orders, F(spec.fields[spec.key].path).asc()).values(*refs)
    records = list(qs[: plan.limit + 1])
    return records[: plan.limit], len(records) > plan.limit


def _filter_q(item, ref: str, kind: Kind) -> Q:
    op, value = item.op, item.value
    if kind is Kind.AGE_GROUP:
        return _age_band_q(op, value)
    if op in ("eq", "ne"):
        q = Q(**{f"{ref}__isnull": True}) if value is None else Q(**{ref: value})
        return ~q if op == "ne" else q
    if op in ("in", "not_in"):
        q = Q(**{f"{ref}__in": list(value)})
        return ~q if op == "not_in" else q
    if op == "between":
        return Q(**{f"{ref}__range": value})
    if op == "contains":
        return Q(**{f"{ref}__icontains": value})
    if op in ("startswith", "endswith"):
        return Q(**{f"{ref}__i{op}": value})
    if op == "month_day_in":
        q = Q(pk__in=[])
        for month, day in (map(int, v.split("-")) for v in value):
            q |= Q(**{f"{ref}__month": month, f"{ref}__day": day})
        return q
    if op == "month_day_between":  # (month, day) from the first to the second, in any year
        (lo_m, lo_d), (hi_m, hi_d) = (map(int, v.split("-")) for v in value)
        after = Q(**{f"{ref}__month__gt": lo_m}) | Q(
            **{f"{ref}__month": lo_m, f"{ref}__day__gte": lo_d}
        )
        before = Q(**{f"{ref}__month__lt": hi_m}) | Q(
            **{f"{ref}__month": hi_m, f"{ref}__day__lte": hi_d}
        )
        return after & before
    return Q(**{f"{ref}__{op}": value})


def _band_q(band: AgeBand) -> Q:
    q = Q(**{f"{AGE}__gte": band.lo})
    return q & Q(**{f"{AGE}__lte": band.hi}) if band.hi is not None else q


def _age_band_q(op: str, value) -> Q:
    nothing = Q(pk__in=[])
    if op in ("eq", "ne"):
        return ~_band_q(value) if op == "ne" else _band_q(value)
    if op in ("in", "not_in"):
        q = Q()
        for band in value:
            q |= _band_q(band)
        return ~q if op == "not_in" else q
    if op == "between":
        low, high = value
        return Q(**{f"{AGE}__gte": low.lo}) & (
            Q(**{f"{AGE}__lte": high.hi}) if high.hi is not None else Q()
        )
    if op == "gt":
        return Q(**{f"{AGE}__gt": value.hi}) if value.hi is not None else nothing
    if op == "gte":
        return Q(**{f"{AGE}__gte": value.lo})
    if op == "lt":
        return Q(**{f"{AGE}__lt": value.lo})
    return Q(**{f"{AGE}__lte": value.hi}) if value.hi is not None else Q()


# --- generated plans --------------------------------------------------------------------------

BANDS = ["20대", "30대", "40대", "50대", "60대 이상"]
OPS_BY_KIND = {
    Kind.STR: ["eq", "ne", "in", "not_in", "gt", "gte", "lt", "lte", "between", "contains"]
    + ["startswith", "endswith"],
    **{
        kind: ["eq", "ne", "in", "not_in", "gt", "gte", "lt", "lte", "between"]
        for kind in (Kind.INT, Kind.DATE, Kind.MONTH, Kind.AGE, Kind.AGE_GROUP)
    },
}
OPS_BY_KIND[Kind.DATE] += ["month_day_between", "month_day_in"]


def _values(entity: str, name: str) -> list:
    """Values a filter on this field may use, as a plan writes them (from the loaded data)."""
    field = ENTITIES[entity].fields[name]
    if field.kind is Kind.AGE:
        return [25, 31, 38, 40, 47, 55, 62]
    if field.kind is Kind.AGE_GROUP:
        return BANDS
    model = ENTITIES[entity].model
    found = model.objects.values_list(field.path, flat=True).distinct().order_by(field.path)
    values = [v for v in found[:400] if v is not None]
    if field.kind is Kind.DATE:
        return [v.isoformat() for v in values]
    return values


def _filter(rng: random.Random, entity: str, name: str, op: str, values: list) -> dict:
    field = ENTITIES[entity].fields[name]
    pick = rng.choice(values)
    if op in ("in", "not_in"):
        value = rng.sample(values, min(len(values), rng.choice([1, 2, 3, 5])))
    elif op == "between":
        low, high = sorted(rng.sample(values, 2), key=values.index)
        value = [low, high]
    elif op == "contains":
        text = str(pick)
        start = rng.randrange(len(text))
        value = text[start : start + rng.choice([1, 2, 3])]
        value = value.lower() if rng.random() < 0.5 else value.upper()  # case-insensitive
    elif op == "month_day_in":  # the month-days of a few dates in the data, any year
        value = sorted({v[5:] for v in rng.sample(values, min(len(values), rng.choice([1, 3])))})
    elif op == "month_day_between":
        value = sorted(v[5:] for v in rng.sample(values, 2))
    elif op in ("startswith", "endswith"):
        text, size = str(pick), rng.choice([1, 3, 6])
        value = text[:size] if op == "startswith" else text[-size:]
        value = value.lower() if rng.random() < 0.5 else value.upper()  # case-insensitive
    elif field.nullable and op in ("eq", "ne") and rng.random() < 0.5:
        value = None
    else:
        value = pick
    return {"field": name, "op": op, "value": value}


def _comparable(entity: str, role: str) -> list[str]:
    return [
        name
        for name in ENTITIES[entity].fields
        if column_mask(role, entity, name) in COMPARABLE_MASKS
    ]


def _every_filter_plans(rng: random.Random) -> list[dict]:
    """Each entity x field x operator once, sometimes with a sort, for any role."""
    plans = []
    for entity, spec in ENTITIES.items():
        for name, field in spec.fields.items():
            values = _values(entity, name)
            for op in OPS_BY_KIND[field.kind]:
                plan = {"entity": entity, "filters": [_filter(rng, entity, name, op, values)]}
                if rng.random() < 0.5:
                    plan["order_by"] = [{"field": name, "direction": rng.choice(["asc", "desc"])}]
                plan["limit"] = rng.choice([3, 20, 100])
                plans.append(plan)
    # Edges: open-ended age bands, empty results, nulls and patterns that LIKE would misread.
    plans += [
        {"entity": "customers", "filters": [{"field": "age_group", "op": op, "value": v}]}
        for op in ("eq", "ne", "gt", "gte", "lt", "lte")
        for v in ("60대 이상", "20대", "30대")
    ]
    plans += [
        {
            "entity": "customers",
            "filters": [{"field": "age_group", "op": "between", "value": ["30대", "60대 이상"]}],
        },
        {
            "entity": "customers",
            "filters": [{"field": "age_group", "op": "not_in", "value": ["30대", "60대 이상"]}],
        },
        {"entity": "customers", "filters": [{"field": "phone", "op": "contains", "value": "%"}]},
        {"entity": "customers", "filters": [{"field": "grade", "op": "contains", "value": "_"}]},
        {"entity": "customers", "filters": [{"field": "rrn", "op": "contains", "value": "\\"}]},
        {"entity": "contracts", "filters": [{"field": "status", "op": "eq", "value": "없음"}]},
        {
            "entity": "premium_payments",
            "fields": ["paid_date", "status"],
            "order_by": [{"field": "paid_date", "direction": "desc"}],
            "limit": 100,
        },
        {
            "entity": "premium_payments",
            "fields": ["paid_date"],
            "order_by": [{"field": "paid_date", "direction": "asc"}],
            "limit": 100,
        },
    ]
    return plans


def _grouped_plans(rng: random.Random, role: str) -> list[dict]:
    plans = []
    for entity, spec in ENTITIES.items():
        comparable = _comparable(entity, role)
        numeric = [n for n in comparable if spec.fields[n].kind in (Kind.INT, Kind.AGE)]
        orderable = [n for n in comparable if spec.fields[n].kind is not Kind.AGE_GROUP]
        for fn in ("count", "sum", "avg", "min", "max"):
            fields = [None] if fn == "count" else numeric if fn in ("sum", "avg") else orderable
            for field in fields + ([rng.choice(comparable)] if fn == "count" else []):
                aggregate = {"fn": fn, "field": field, "as": "value"}
                # Over everything, then per group, sorted by the aggregate or a key.
                plans.append({"entity": entity, "aggregates": [aggregate]})
                group_by = rng.sample(comparable, rng.choice([1, 1, 2]))
                order = rng.choice(["value", group_by[0]])
                plans.append(
                    {
                        "entity": entity,
                        "group_by": group_by,
                        "aggregates": [aggregate, {"fn": "count", "field": None, "as": "n"}],
                        "order_by": [{"field": order, "direction": rng.choice(["asc", "desc"])}],
                        "limit": rng.choice([2, 10, 100]),
                    }
                )
        for name in comparable:  # every groupable column, alone and without an aggregate
            plans.append({"entity": entity, "group_by": [name], "limit": 100})
    return plans


def _random_plans(rng: random.Random, role: str, count: int) -> list[dict]:
    plans = []
    for _ in range(count):
        entity = rng.choice(list(ENTITIES))
        spec = ENTITIES[entity]
        comparable = _comparable(entity, role)
        plan: dict = {"entity": entity, "limit": rng.choice([1, 5, 20, 100])}
        filters = []
        for name in rng.sample(comparable, rng.choice([0, 1, 2, 3])):
            op = rng.choice(OPS_BY_KIND[spec.fields[name].kind])
            filters.append(_filter(rng, entity, name, op, _values(entity, name)))
        plan["filters"] = filters
        if rng.random() < 0.4:
            plan["group_by"] = rng.sample(comparable, rng.choice([1, 2]))
            numeric = [n for n in comparable if spec.fields[n].kind in (Kind.INT, Kind.AGE)]
            plan["aggregates"] = [
                {"fn": "count", "field": None, "as": "n"},
                {"fn": rng.choice(["sum", "avg", "min", "max"]), "field": rng.choice(numeric)},
            ]
            keys = [*plan["group_by"], "n"]
        else:
            plan["fields"] = rng.sample(list(spec.fields), rng.choice([0, 1, 3, 6]))
            keys = comparable
        plan["order_by"] = [
            {"field": key, "direction": rng.choice(["asc", "desc"])}
            for key in rng.sample(keys, rng.choice([0, 1, 2]))
        ]
        plans.append(plan)
    return plans


def _same_answer(plan: dict, stakeholder) -> None:
    try:
        expected = orm_execute_plan(plan, stakeholder=stakeholder)
    except PlanError as exc:
        with pytest.raises(type(exc)) as refused:
            vpd.execute_plan(plan, stakeholder=stakeholder)
        assert (refused.value.code, refused.value.message) == (exc.code, exc.message)
        return
    assert vpd.execute_plan(plan, stakeholder=stakeholder) == expected, plan


# --- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("stakeholder_id", STAKEHOLDERS)
def test_every_entity_field_and_operator_answers_as_the_orm_did(kb, stakeholder_id):
    stakeholder = stakeholder_get(stakeholder_id)
    for plan in _every_filter_plans(random.Random(stakeholder_id)):
        _same_answer(plan, stakeholder)


@pytest.mark.parametrize("role", ROLES)
def test_every_aggregate_and_grouping_answers_as_the_orm_did(kb, role):
    stakeholder = stakeholder_get(ROLES[role])
    for plan in _grouped_plans(random.Random(role), role):
        _same_answer(plan, stakeholder)


@pytest.mark.parametrize("role", ROLES)
def test_random_plans_answer_as_the_orm_did(kb, role):
    stakeholder = stakeholder_get(ROLES[role])
    for plan in _random_plans(random.Random(f"random {role}"), role, 150):
        _same_answer(plan, stakeholder)


@pytest.mark.parametrize("role", ROLES)
def test_plans_on_masked_columns_are_refused_as_before(kb, role):
    """Masked columns in a condition, sort, group or aggregate: the same refusal either way."""
    stakeholder = stakeholder_get(ROLES[role])
    for entity, spec in ENTITIES.items():
        for name, field in spec.fields.items():
            if column_mask(role, entity, name) in COMPARABLE_MASKS:
                continue
            value = "x" if field.kind is Kind.STR else "2026-01-01"
            for plan in (
                {"entity": entity, "filters": [{"field": name, "op": "eq", "value": value}]},
                {"entity": entity, "order_by": [{"field": name, "direction": "asc"}]},
                {"entity": entity, "group_by": [name]},
                {"entity": entity, "aggregates": [{"fn": "min", "field": name}]},
            ):
                with pytest.raises(vpd.MaskedColumnError):
                    vpd.execute_plan(plan, stakeholder=stakeholder)
                _same_answer(plan, stakeholder)


@pytest.mark.parametrize("role", ROLES)
def test_ages_and_masked_columns_are_what_the_csv_files_say(kb, role):
    """Independent of both paths: every visible customer's columns, from the CSV rows."""
    stakeholder_id = ROLES[role]
    fields = ["customer_name", "birth_date", "phone", "rrn", "age", "age_group"]
    answer = vpd.execute_plan(
        {"entity": "customers", "fields": fields, "limit": 100},
        stakeholder=stakeholder_get(stakeholder_id),
    )
    year_only = role == "hq_analyst"
    expected = []
    for customer in sorted(visible_customers(stakeholder_id), key=lambda c: c["customer_id"]):
        years = age(customer["birth_date"], year_only=year_only)
        row = {"customer_id": customer["customer_id"]}
        row |= {name: shown(role, name, customer[name]) for name in fields[:4]}
        row |= {"age": years, "age_group": f"{years // 10 * 10}대"}
        expected.append(row)
    assert answer["rows"] == expected[:100]
    assert answer["truncated"] == (len(expected) > 100)
    assert {c["customer_id"] for c in answer["rows"]} <= set(CUSTOMERS)


def test_the_statement_is_compiled_once_per_shape_and_holds_no_value(kb):
    stakeholder = stakeholder_get("KB-P-001")
    vpd._compile.cache_clear()

    for grade in ("VIP", "일반", "우수", "' OR 1=1 --"):
        vpd.execute_plan(
            {"entity": "customers", "filters": [{"field": "grade", "op": "eq", "value": grade}]},
            stakeholder=stakeholder,
        )
    vpd.execute_plan(
        {"entity": "customers", "filters": [{"field": "grade", "op": "eq", "value": "VIP"}]},
        stakeholder=stakeholder_get("KB-P-002"),  # same role: same statement, other values
    )

    info = vpd._compile.cache_info()
    assert (info.misses, info.hits) == (1, 4)
    (shape,) = [s for s in _cached_shapes()]
    compiled = vpd._compile(shape)
    assert "VIP" not in compiled.sql and "KB-P-00" not in compiled.sql
    assert "OR 1=1" not in compiled.sql


def _cached_shapes():
    # lru_cache keeps no public list of its keys; compiling the one known shape again finds it.
    plan = plan_parse(
        {"entity": "customers", "filters": [{"field": "grade", "op": "eq", "value": "?"}]}
    )
    stakeholder = stakeholder_get("KB-P-001")
    masks = vpd._column_masks(plan, stakeholder.role)
    columns = vpd._output_columns(plan, masks)
    paths, _values = vpd._row_filter(stakeholder, plan.spec.customer_path)
    yield vpd._shape(plan, masks, columns, paths, "default")


def test_the_cache_of_statements_is_bounded():
    assert vpd._compile.cache_info().maxsize == vpd.COMPILED_SHAPES_MAX


def test_every_operator_a_plan_accepts_is_generated_here():
    from kb.plans import _OPS_BY_KIND

    assert {kind: set(ops) for kind, ops in OPS_BY_KIND.items()} == {
        kind: set(_OPS_BY_KIND[kind]) for kind in OPS_BY_KIND
    }
