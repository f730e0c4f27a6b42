"""The KB data layer: run one validated query plan for one stakeholder under the VPD policy.

Rows are limited by the policy's filter in every query and, on PostgreSQL, also by row-level
security: the read runs as the reader role with the stakeholder's context set for its transaction
only. Columns are masked here after fetch, identically on every database.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections, router, transaction
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
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, ExtractYear

from kb.answers import answer_build, json_value
from kb.models import Customer, Stakeholder
from kb.plans import AgeBand, Filter, Kind, Plan, PlanError, aggregate_label, plan_parse
from kb.policy import (
    COMPARABLE_MASKS,
    CONTEXT_STAKEHOLDER,
    Mask,
    PolicyRefused,
    check_stakeholder_allowed,
    column_mask,
    mask_value,
    reader_role,
    role_label,
    visible_customers_q,
)
from kb.selectors import kb_as_of_date

AGE = "hb_age"
AGE_GROUP = "hb_age_group"
_AGGREGATES = {"count": Count, "sum": Sum, "avg": Avg, "min": Min, "max": Max}


class MaskedColumnError(PlanError):
    """The plan filters, sorts, groups or aggregates on a column this user sees masked."""

    def __init__(self, message: str):
        super().__init__(message, code="masked_column")


def execute_plan(
    plan: dict | Plan, *, stakeholder: Stakeholder, interpretation: dict | None = None
) -> dict:
    """The answer to `plan` as `stakeholder` may see it (kb.answers.ANSWER_JSON_SCHEMA).

    Raises PolicyRefused (before any query) when the stakeholder may see nothing, PlanError when
    the plan is invalid, MaskedColumnError (a PlanError) when it would reveal a masked column.
    """
    check_stakeholder_allowed(stakeholder)
    # A Plan object is validated again from its JSON form: there is one way in, and it clamps.
    parsed = plan_parse(plan.as_dict() if isinstance(plan, Plan) else plan)
    masks = _column_masks(parsed, stakeholder.role)
    columns = _output_columns(parsed, masks)
    as_of = kb_as_of_date()
    with _reader_context(stakeholder):
        records, truncated = _fetch(
            parsed,
            stakeholder=stakeholder,
            masks=masks,
            as_of=as_of,
            output=[name for name, _label in columns if name in parsed.spec.fields],
        )

    spec = parsed.spec
    aggregate_fields = {agg.alias: agg.field for agg in parsed.aggregates}
    # (name, queryset key, mask, is an age group); aggregates are over comparable columns only.
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
        interpretation={**(interpretation or {}), "plan": parsed.as_dict()},
    )


# --- column policy on the plan ----------------------------------------------------------------


def _column_masks(plan: Plan, role: str) -> dict[str, Mask]:
    """The mask of every field the plan touches or may output; refuses what the policy forbids."""
    spec = plan.spec
    masks: dict[str, Mask] = {}
    used = plan.referenced_fields()
    for name in [spec.key, *spec.defaults, *used]:
        mask = column_mask(role, plan.entity, name)
        if mask is not None:
            masks[name] = mask
    for name, use in used.items():
        mask = masks.get(name)
        label = spec.fields[name].label
        if mask is None:  # known to the plan but not to the policy: fail closed
            raise PlanError(f"조회할 수 없는 필드입니다: {label}({name})", code="unknown_field")
        if use != "select" and mask not in COMPARABLE_MASKS:
            raise MaskedColumnError(
                f"{label}({name}) 열은 {role_label(role)} 권한에서 가려져 있어 "
                "조건·정렬·그룹·집계에 쓸 수 없습니다."
            )
    return masks


def _output_columns(plan: Plan, masks: dict[str, Mask]) -> list[tuple[str, str]]:
    spec = plan.spec
    if plan.grouped:
        names = list(plan.group_by)
    elif plan.fields:
        names = list(dict.fromkeys([spec.key, *plan.fields]))
    else:
        # Default columns leave out what this role would only ever see as null.
        names = [n for n in spec.defaults if masks.get(n) not in (None, Mask.WITHHELD)]
        names = list(dict.fromkeys([spec.key, *names]))
    columns = [(name, spec.fields[name].label) for name in names if name in masks]
    columns += [(agg.alias, aggregate_label(plan, agg)) for agg in plan.aggregates]
    return columns


# --- query ------------------------------------------------------------------------------------


def _ref(plan: Plan, name: str) -> str:
    """The queryset name under which a field (or aggregate alias) is selected."""
    spec = plan.spec
    if name not in spec.fields:
        return f"hb_agg_{[agg.alias for agg in plan.aggregates].index(name)}"
    kind = spec.fields[name].kind
    if kind is Kind.AGE:
        return AGE
    if kind is Kind.AGE_GROUP:
        return AGE_GROUP
    return spec.fields[name].path


def _age_expression(path: str, as_of, *, year_only: bool):
    age = Value(as_of.year) - Cast(ExtractYear(path), IntegerField())
    if not year_only:
        birthday_ahead = Q(**{f"{path}__month__gt": as_of.month}) | Q(
            **{f"{path}__month": as_of.month, f"{path}__day__gt": as_of.day}
        )
        age = age - Case(When(birthday_ahead, then=Value(1)), default=Value(0))
    return ExpressionWrapper(age, output_field=IntegerField())


def _queryset(plan: Plan, *, stakeholder: Stakeholder, masks, as_of, output) -> QuerySet:
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
        qs = qs.filter(_filter_q(item, _ref(plan, item.field), spec.fields[item.field].kind))
    return qs


def _fetch(
    plan: Plan, *, stakeholder: Stakeholder, masks, as_of, output: list[str]
) -> tuple[list[dict], bool]:
    qs = _queryset(plan, stakeholder=stakeholder, masks=masks, as_of=as_of, output=output)
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
        # Ties are broken by the group keys, so answers are stable across databases.
        qs = qs.order_by(*orders, *[F(key).asc(nulls_last=True) for key in keys])
    else:
        spec = plan.spec
        refs = dict.fromkeys(_ref(plan, name) for name in output)
        qs = qs.order_by(*orders, F(spec.fields[spec.key].path).asc()).values(*refs)
    records = list(qs[: plan.limit + 1])
    return records[: plan.limit], len(records) > plan.limit


def _filter_q(item: Filter, ref: str, kind: Kind) -> Q:
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
    return Q(**{f"{ref}__{op}": value})  # gt, gte, lt, lte


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
    return Q(**{f"{AGE}__lte": value.hi}) if value.hi is not None else Q()  # lte


# --- database context -------------------------------------------------------------------------


@contextmanager
def _reader_context(stakeholder: Stakeholder) -> Iterator[None]:
    """A transaction (or savepoint) that reads as the stakeholder and is always rolled back.

    It only reads, and the rollback is what ends SET LOCAL ROLE and the RLS context, even when this
    block is a savepoint inside a caller's transaction; a pooled connection carries nothing on.
    """
    using = router.db_for_read(Customer)
    connection = connections[using]
    if connection.vendor != "postgresql":
        # No database-side context to scope here, and on SQLite a transaction would take the
        # write lock (IMMEDIATE mode), queueing every read behind audit writes.
        stored = (
            Stakeholder.objects.using(using)
            .filter(pk=stakeholder.pk)
            .values_list("role", "branch_id", "status")
            .first()
        )
        _recheck_stakeholder(stakeholder, stored)
        yield
        return
    with transaction.atomic(using=using):
        try:
            stored = _set_postgres_context(connection, stakeholder)
            _recheck_stakeholder(stakeholder, stored)
            yield
        finally:
            transaction.set_rollback(True, using=using)


def _set_postgres_context(connection, stakeholder: Stakeholder) -> tuple | None:
    """Switch to the reader role and set the context; returns the stored stakeholder row."""
    role = reader_role()
    table = connection.ops.quote_name(Stakeholder._meta.db_table)
    try:
        with connection.cursor() as cursor:
            # set_config(..., true) is SET LOCAL: it lasts until this transaction/savepoint ends.
            # One round trip; every value is a bound parameter.
            cursor.execute(
                "SELECT set_config('role', %s, true), set_config(%s, %s, true),"  # noqa: S608
                " s.role, s.branch_id, s.status"
                f" FROM (SELECT 1) AS one LEFT JOIN {table} s ON s.stakeholder_id = %s",
                [role, CONTEXT_STAKEHOLDER, stakeholder.pk, stakeholder.pk],
            )
            row = cursor.fetchone()
    except DatabaseError as exc:
        raise ImproperlyConfigured(
            f"KB reads cannot switch to the database role {role!r}; "
            "run `manage.py setup_kb_db_role` as a database administrator"
        ) from exc
    return None if row[2] is None else tuple(row[2:])


def _recheck_stakeholder(stakeholder: Stakeholder, stored: tuple | None) -> None:
    """Decide on the stored stakeholder row, not on an object that may be stale or made up."""
    if stored is None:
        raise PolicyRefused("알 수 없는 사용자입니다: 조회 권한 없음", reason="unknown_stakeholder")
    if tuple(stored) != (stakeholder.role, stakeholder.branch_id, stakeholder.status):
        raise PolicyRefused(
            "사용자 정보가 바뀌었습니다: 조회 권한 없음 (다시 시도하세요)",
            reason="stale_stakeholder",
        )
