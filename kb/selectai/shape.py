"""The reader's shape stage: what an answer returns (rows, groups, a number, a ranking), in what
order and how many, and the words of the question that say so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kb.catalogue import CONTRACTS, CUSTOMERS, ENTITIES, PAYMENTS

from .dates import Period
from .question import Question, span
from .stages import (
    CUSTOMER_DETAIL_FIELDS,
    FIELDS,
    IDENTITY_FIELDS,
    ORDERED_DIMS,
    Fragment,
)
from .wording import AGG_LABELS, DIM_FIELDS, DIM_LABELS, MEASURE_LABELS, OP_LABELS, agg_label


@dataclass
class Shape:
    """The shape stage's part: what is returned, grouped, aggregated, ordered, and how many."""

    family: str
    fields: list[str] = field(default_factory=list)
    group_by: list[str] = field(default_factory=list)
    aggregates: list[dict] = field(default_factory=list)
    order_by: list[dict] = field(default_factory=list)
    limit: int | None = None
    fragment: Fragment = field(default_factory=Fragment)


def shape_stage(
    q: Question,
    entity: str,
    filters: list[dict],
    applied_period: Period | None,
    taken: frozenset[int],
) -> Shape:
    f = q.f
    rank = q.rank
    grouped = q.grouped_dims
    aggs = q.agg_fns
    extremes = f.values("extreme") if rank is None else []
    measures = f.values("measure")
    fragment = Fragment()
    for kind in ("agg", "how_much", "extreme", "order", "most"):
        for _, m in f.kinds(kind):
            fragment.consumed.update(span(m))
    limit = None
    counted = q.count_numbers
    if counted and rank is None:
        limit = counted[0].value  # "10건만", "다섯 명"
        fragment.understood.append(f"{counted[0].value}건")
        fragment.consumed |= span(counted[0])

    # Customer detail: one known customer, no aggregation.
    if (
        entity == CUSTOMERS
        and (f.customer_ids or f.customer_names)
        and not (grouped or aggs or rank)
    ):
        return Shape(
            "customer_detail",
            fields=list(CUSTOMER_DETAIL_FIELDS),
            order_by=[{"field": "customer_id", "direction": "asc"}],
            limit=limit,
            fragment=fragment,
        )

    if rank is not None:
        return _shape_rank(q, entity, rank, grouped, fragment)

    if _asks_for_unpaid_customers(q, entity, grouped, aggs):
        return _unpaid_customers(limit, fragment)

    group_dims = _group_dims(q, entity, filters, fragment)
    # "금액이 4만원 이상인 미납 건": the amount names a condition, not the figure wanted
    amount_is_condition = any(x["field"] == "amount" for x in filters)
    amount_wanted = "amount" in measures and not (
        f.has("list") or f.has("history") or f.has("detail") or amount_is_condition
    )
    if group_dims or aggs or extremes or amount_wanted:
        shape = _aggregates(q, entity, aggs, extremes, group_dims, fragment)
        shape.limit = limit
        if "age_group" in group_dims:
            shape.family = "age_group"
        return shape

    shape = _shape_rows(q, entity, filters, applied_period, taken, fragment)
    shape.limit = limit
    return shape


def _unpaid_customers(limit: int | None, fragment: Fragment) -> Shape:
    """ "미납 고객 명단" / "미납자 몇 명": one row per customer, so the row count answers it."""
    fragment.understood.append("미납 고객별 건수·금액")
    fragment.notes.append("unpaid_customers")
    return Shape(
        "unpaid",
        group_by=list(DIM_FIELDS["customer"]),
        aggregates=[
            {"fn": "count", "field": None, "as": "count"},
            {"fn": "sum", "field": "amount", "as": "total_amount"},
        ],
        order_by=[{"field": "total_amount", "direction": "desc"}],
        limit=limit,
        fragment=fragment,
    )


def _group_dims(q: Question, entity: str, filters: list[dict], fragment: Fragment) -> list[str]:
    """The dimensions to group by: written ("지점별"), compared ("A와 B 비교"), or asked as a
    breakdown ("연령대별"; "30대 고객" is a filter, read by the age stage)."""
    f = q.f
    group_dims = []
    for dim, m in q.grouping_matches:
        fld = DIM_FIELDS[dim] if dim != "month" or entity == PAYMENTS else None
        if fld and all(x in FIELDS[entity] for x in fld):
            group_dims.append(dim)
            fragment.consumed |= span(m) | _group_marks(q, m)
        else:
            fragment.cannot(f"{DIM_LABELS[dim]}별 묶기", span(m) | _group_marks(q, m))
    group_dims = list(dict.fromkeys(group_dims))
    compared = _compared_dim(q, filters, fragment)
    if compared and compared not in group_dims:
        group_dims.append(compared)
    if f.has("dim", "age_group") and "age_group" not in group_dims:
        if not any(x["field"] in ("age", "age_group") for x in filters):
            group_dims.append("age_group")
    if f.has("dim", "gender") and "gender" not in group_dims:
        if not f.values("gender"):
            group_dims.append("gender")
    for dim in ("age_group", "gender"):
        fragment.consumed |= {i for v, m in f.kinds("dim") if v == dim for i in span(m)}
    return group_dims


_DIM_OF_FIELD = {"branch_id": "branch", "product_code": "product", "category": "category",
                 "grade": "grade", "planner_id": "planner", "status": "status"}  # fmt: skip


def _compared_dim(q: Question, filters: list[dict], fragment: Fragment) -> str | None:
    """ "강남지점과 종로지점 비교", "남자 고객과 여자 고객 수 비교": side by side, one row each."""
    words = {i for _, m in q.f.kinds("compare") for i in span(m)}
    if not words:
        return None
    listed = [_DIM_OF_FIELD[x["field"]] for x in filters
              if x["op"] == "in" and x["field"] in _DIM_OF_FIELD]  # fmt: skip
    if len(set(q.f.values("gender"))) > 1:
        listed.append("gender")
    if not listed:
        fragment.cannot("비교", words)
        return None
    fragment.consumed |= words
    return listed[0]


def _group_marks(q: Question, m) -> set[int]:
    """The 별 / by / per written with a grouped dimension."""
    out: set[int] = set()
    for _, g in q.f.kinds("group"):
        if g.first == m.last + 1 or g.last + 1 == m.first or (g.first, g.last) == (m.first, m.last):
            out |= span(g)
    return out


def _asks_for_unpaid_customers(q: Question, entity: str, grouped: list[str], aggs: list) -> bool:
    f = q.f
    if entity != PAYMENTS or "미납" not in f.values("pay_status") or grouped:
        return False
    if set(aggs) - {"count"} or f.customer_ids or f.customer_names:
        return False
    # The customer must be what is unpaid ("미납 고객", "미납자"), not the scope ("담당 고객의
    # 미납 보험료"), and no premium word may follow it ("미납 고객의 보험료 내역" wants rows).
    unpaid_at = min(m.first for v, m in f.kinds("pay_status") if v == "미납")
    customer_at = [p for p, unit in q.unit_candidates if unit == "customer"]
    customer_at = [p for p in customer_at if p >= unpaid_at]
    if not customer_at:
        return False
    return not any(m.first > customer_at[0] for v, m in f.kinds("noun") if v == "premium")


def measure_field(q: Question, entity: str) -> str | None:
    measures = q.f.values("measure")
    if entity == PAYMENTS:
        return "amount"
    if entity == CONTRACTS:
        return "sum_insured" if "sum_insured" in measures else "monthly_premium"
    if "age" in measures or q.f.has("dim", "age_group"):
        return "age"
    return None


def _money_named_beside(q: Question, entity: str) -> bool:
    """A money column named next to a count, with no amount to compare it with: asked for as a
    total of its own ("건수와 금액"), not left unread."""
    money = {"amount"} if entity == PAYMENTS else {"monthly_premium", "sum_insured"}
    amount = any(n.unit == "won" or (n.unit is None and n.value >= 1000) for n in q.f.numbers)
    return bool(money & set(q.f.values("measure"))) and not amount


def _aggregates(q: Question, entity, aggs, extremes, dims, fragment: Fragment) -> Shape:
    f = q.f
    measure = measure_field(q, entity)
    fns = list(aggs) + list(extremes)
    if not fns:
        if entity == PAYMENTS and "amount" in f.values("measure"):
            fns = ["sum"]
        elif entity == PAYMENTS:
            fns = ["count", "sum"]
        elif entity == CONTRACTS and set(f.values("measure")) & {"monthly_premium",
                                                                 "sum_insured"}:  # fmt: skip
            fns = ["sum"]
        elif f.has("noun", "premium") and entity == CONTRACTS:
            fns = ["sum"]
        else:
            fns = ["count"]
    elif fns == ["count"] and _money_named_beside(q, entity):
        fns = ["count", "sum"]  # "미납 건수와 미납 금액": the count and the sum it names
    aggregates = []
    agg_words = {i for k in ("agg", "extreme", "how_much") for _, m in f.kinds(k) for i in span(m)}
    for fn in dict.fromkeys(fns):
        if fn == "count":
            aggregates.append({"fn": "count", "field": None, "as": "count"})
            continue
        if measure is None or (fn == "sum" and measure == "age"):
            fragment.cannot(f"{AGG_LABELS[fn]}(합산할 금액 항목이 없습니다)", agg_words)
            continue
        aggregates.append({"fn": fn, "field": measure, "as": _alias(fn, measure)})
    if not aggregates:
        aggregates.append({"fn": "count", "field": None, "as": "count"})
    shape = Shape("aggregate", aggregates=aggregates, fragment=fragment)
    shape.group_by = [x for dim in dims for x in DIM_FIELDS[dim]]
    for dim in dims:
        fragment.understood.append(f"{DIM_LABELS[dim]}별")
    for agg in aggregates:
        fragment.understood.append(agg_label(agg))
    if dims:
        first_dim = dims[0]
        if first_dim in ORDERED_DIMS:
            shape.order_by = [{"field": DIM_FIELDS[first_dim][0], "direction": "asc"}]
        else:
            shape.order_by = [{"field": aggregates[0]["as"], "direction": "desc"}]
    return shape


def _shape_rank(q: Question, entity: str, rank, grouped: list[str], fragment: Fragment) -> Shape:
    f = q.f
    fragment.consumed |= rank.consumed
    if rank.by_count:
        threshold = rank.threshold
        written = f"{threshold.value}{threshold.counter or ''} {OP_LABELS[threshold.modifier]}"
        fragment.cannot(f"'{written}' 건수 조건", span(threshold))
    unit = q.rank_unit
    aggs = q.agg_fns
    nouns = set(f.values("noun"))
    measures = set(f.values("measure"))
    direction = rank.direction
    label_dir = "상위" if direction == "desc" else "하위"
    fragment.consumed |= {
        i for m in f.matches for k, v in m.payloads if k == "dim" and v == unit for i in span(m)
    }

    # What is being compared: money, age, or a count of something.
    counted = None
    if (
        rank.by_count
        or "count" in aggs
        or not (measures or {"premium", "payment"} & nouns or entity == PAYMENTS)
    ):
        counted = "count"
    measure = None if counted else measure_field(q, entity)
    if measure is None:
        counted = "count"

    row_level = (unit == "contract" and entity == CONTRACTS) or (
        unit == "customer" and entity == CUSTOMERS and measure == "age"
    )
    if row_level and measure is not None:
        fragment.understood.append(f"{MEASURE_LABELS.get(measure, measure)} {label_dir} {rank.n}")
        return Shape(
            "top_n",
            order_by=[{"field": measure, "direction": direction}],
            limit=rank.n,
            fragment=fragment,
        )

    group_dims = _ranked_dims(q, entity, unit, fragment)
    if counted == "count" or measure is None:  # no measure is always counted (above)
        agg = {"fn": "count", "field": None, "as": "count"}
    else:
        fn = "avg" if "avg" in aggs else "sum"
        agg = {"fn": fn, "field": measure, "as": _alias(fn, measure)}
    fragment.understood.append(f"{agg_label(agg)} {label_dir} {rank.n}")
    return Shape(
        "top_n",
        group_by=[x for d in group_dims for x in DIM_FIELDS[d]],
        aggregates=[agg],
        order_by=[{"field": agg["as"], "direction": direction}],
        limit=rank.n,
        fragment=fragment,
    )


def _ranked_dims(q: Question, entity: str, unit: str | None, fragment: Fragment) -> list[str]:
    """What a ranking groups by: the ranked unit (customers when it cannot be grouped), then any
    other grouping the question writes ("지점별 … 상위 3명")."""
    dim: str | None = unit if unit in DIM_FIELDS else "customer"
    assert dim is not None
    if not all(x in FIELDS[entity] for x in DIM_FIELDS[dim]):
        fragment.cannot(f"{DIM_LABELS[dim]} 기준 순위", set())
        dim = "customer" if "customer_id" in FIELDS[entity] else None
    extra = [d for d, _ in q.grouping_matches if d != dim]
    extra_dims = [
        d for d in dict.fromkeys(extra) if all(x in FIELDS[entity] for x in DIM_FIELDS[d])
    ]
    for d, m in q.grouping_matches:
        if d == dim or d in extra_dims:
            fragment.consumed |= span(m) | _group_marks(q, m)
    return ([dim] if dim else []) + extra_dims


def _requested_columns(q: Question, entity: str, fragment: Fragment) -> list[str]:
    """ "고객 전화번호 목록" -> the row's identity columns plus the columns asked for."""
    wanted = q.f.kinds("column")
    available = []
    for column, m in wanted:
        if column in FIELDS[entity]:
            available.append(column)
            fragment.consumed |= span(m)
        else:
            fragment.cannot(f"{column} 항목", span(m))
    available = list(dict.fromkeys(available))
    if available:
        labels = ", ".join(ENTITIES[entity].fields[name].label for name in available)
        fragment.understood.append(f"열: {labels}")
        return list(dict.fromkeys(IDENTITY_FIELDS[entity] + available))
    return []


_COLUMN_ORDERS = {"by_column": None, "asc_column": "asc", "desc_column": "desc"}


def _sort_column(q: Question, entity: str) -> tuple[str, str | None] | None:
    """The column a sort word names, and its direction if the word says one: "계약일 순으로",
    "생년월일 빠른 순", "sort customers by phone number", "이름 가나다순"."""
    for value, m in q.f.kinds("order"):
        if value not in _COLUMN_ORDERS:
            continue
        near = [
            (min(abs(c.first - m.last), abs(m.first - c.last)), column)
            for column, c in q.f.kinds("column")
            if c.last < m.first
            and m.first - c.last <= 3
            or c.first > m.last
            and c.first - m.last <= 4
        ]
        if not near and value == "asc_column" and "가나다" in m.text:
            near = [(0, "customer_name")]
        if near:
            return min(near)[1], _COLUMN_ORDERS[value]
    return None


def _shape_rows(
    q: Question, entity: str, filters: list[dict], applied_period, taken, fragment: Fragment
) -> Shape:
    f = q.f
    fields = _requested_columns(q, entity, fragment)
    order: Sequence[str] = f.values("order")
    if not order and f.has("recent") and applied_period is None:
        order = ["desc_date"]  # "최근 가입한 고객": newest first
        fragment.consumed |= {i for _, m in f.kinds("recent") for i in span(m)}
    order_by: list[dict] = []
    sort = _sort_column(q, entity)
    if sort is not None:
        sort_column, direction = sort
        if direction is None:
            direction = "desc" if "desc_date" in order or f.has("sort", "desc") else "asc"
        order_by = [{"field": sort_column, "direction": direction}]
    date_field = ENTITIES[entity].date_field
    if order and not order_by:
        direction = "asc" if "asc_date" in order else "desc"
        order_by = [{"field": date_field, "direction": direction}]
        label = ENTITIES[entity].fields[date_field].label
        fragment.understood.append(f"{label} {'오래된 순' if direction == 'asc' else '최신순'}")
    shape = Shape("customer_list", fields=fields, fragment=fragment)
    if entity == PAYMENTS:
        if not order_by or order_by[0]["field"] == "due_month":
            direction = order_by[0]["direction"] if order_by else "desc"
            order_by = [{"field": "due_month", "direction": direction},
                        {"field": "contract_id", "direction": "asc"}]  # fmt: skip
        shape.order_by = order_by
        shape.family = "unpaid" if "미납" in f.values("pay_status") else "premium_detail"
        return shape
    if entity == CONTRACTS:
        if q.expire_mode(taken) == "expiring":
            shape.order_by = order_by or [{"field": "end_date", "direction": "asc"}]
            shape.family = "expiring"
            return shape
        shape.order_by = order_by or [{"field": "contract_id", "direction": "asc"}]
        shape.family = "contracts"
        return shape
    shape.order_by = order_by or [{"field": "customer_id", "direction": "asc"}]
    if any(x["field"] in ("age", "age_group") for x in filters):
        shape.family = "age_group"
    return shape


def _alias(fn: str, fld: str) -> str:
    if fn == "sum":
        return f"total_{fld}"
    return f"{fn}_{fld}"
