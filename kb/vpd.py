"""The KB data layer: run one validated query plan for one stakeholder under the VPD policy.

Rows are limited by the policy's filter in every query and, on PostgreSQL, also by row-level
security: the read runs as the reader role with the stakeholder's context set for its transaction
only. Columns are masked here after fetch, identically on every database (a withheld column is not
even read).

A plan runs as ONE parameterised SQL statement, compiled once per plan *shape* (entity, fields,
filter fields and operators, grouping, aggregates, sort, the role's masks and the policy's row
filter) and kept in a small bounded cache. The compiler is given the shape only, never a value, so
nothing a user wrote can reach the SQL text; values are bound as parameters on every call. Why SQL
written here rather than a queryset compiled by the ORM: a queryset's parameters cannot be mapped
back to the plan's values without guessing (Django rewrites dates, LIKE patterns and lists), while
every fragment below is a plain reading of the ORM lookup it replaces, and the vendor-specific parts
(quoting, date extraction, LIKE operators and casts, value adaptation) come from Django's own
backend. tests/kb/test_vpd_compiled.py checks the answers against the ORM over generated plans.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import NamedTuple

from django.core.exceptions import FieldDoesNotExist, ImproperlyConfigured
from django.db import DatabaseError, connections, router, transaction
from django.utils.translation import gettext

from core import tracing
from kb.answers import answer_build, json_value
from kb.models import Customer, Stakeholder
from kb.plans import ENTITIES, AgeBand, Kind, Plan, PlanError, plan_parse
from kb.policy import (
    CONTEXT_STAKEHOLDER,
    ConditionRefused,
    Mask,
    PolicedPlan,
    PolicyRefused,
    RowFilter,
    StakeholderSnapshot,
    check_stakeholder_allowed,
    column_masks,
    mask_value,
    output_columns,
    police,
    query_refusal,
    reader_role,
    visible_customers_q,
)
from kb.selectors import kb_as_of_date

# Distinct shapes seen by a running server are few (the parser's families times roles); a model
# provider could propose more, and the oldest are then compiled again.
COMPILED_SHAPES_MAX = 512

# The one refusal of a masked use is the policy's (kb.policy.ConditionRefused, a PlanError).
MaskedColumnError = ConditionRefused


def execute(policed: PolicedPlan, *, interpretation: dict | None = None) -> dict:
    """The answer to a plan the policy has allowed (kb.answers.ANSWER_JSON_SCHEMA).

    Takes the policy's decision as given: the masks, the columns and the row filter. What it checks
    again is the one thing that can change after the decision, in the database itself: inside the
    reading transaction, the stored stakeholder must still be the asker (PolicyRefused if not), and
    on PostgreSQL row-level security bounds the rows whatever the statement says.
    """
    plan, asker = policed.plan, policed.asker
    using = router.db_for_read(Customer)
    compiled = _compile(
        _shape(
            plan,
            policed.masks,
            policed.columns,
            policed.rows.paths,
            using,
            policed.related_masks,
        )
    )
    as_of = kb_as_of_date()
    connection = connections[using]
    request = _Request(plan, policed.rows.values, as_of, connection)
    params = [bind(request) for bind in compiled.binders]
    with tracing.span("kb.execute_plan", {"kb.entity": plan.entity}), _reader_context(asker):
        records = _fetch(connection, compiled.sql, params)
    truncated = len(records) > plan.limit
    rows = [
        {name: cell(value) for (name, cell), value in zip(compiled.cells, record, strict=True)}
        for record in records[: plan.limit]
    ]
    interpretation = {**(interpretation or {}), "plan": plan.as_dict()}
    if policed.notes:
        interpretation["notes"] = [*interpretation.get("notes", []), *policed.notes]
    return answer_build(
        columns=list(policed.columns),
        rows=rows,
        truncated=truncated,
        limit=plan.limit,
        masked_columns=list(policed.masked_columns),
        as_of=as_of,
        stakeholder_id=asker.stakeholder_id,
        role=asker.role,
        branch_id=asker.branch_id,
        interpretation=interpretation,
    )


def execute_plan(
    plan: dict | Plan, *, stakeholder: Stakeholder | StakeholderSnapshot | None, interpretation=None
) -> dict:
    """A literal plan, judged as written, run as `stakeholder`: the policy, then execute().

    For callers that hold a plan rather than a question (the access page, the benchmarks and the
    conformance tests). Raises PolicyRefused (before any query) when the stakeholder may see
    nothing, PlanError when the plan is invalid, ConditionRefused (a PlanError) when it would
    reveal a masked column.
    """
    asker = StakeholderSnapshot.of(stakeholder)
    check_stakeholder_allowed(asker)  # whether it may query at all, before the plan is read
    # A hand-built Plan is validated from its JSON form like a dict: a literal plan has one way in.
    parsed = plan_parse(plan.as_dict() if isinstance(plan, Plan) else plan)
    policed = police(parsed, asker, as_question=False)
    # A literal plan's row filter is read through visible_customers_q, the policy's ORM form of
    # the same data: the row-level security tests take it away there and see RLS hold alone.
    paths, values = _row_filter(policed.asker, parsed.spec.customer_path)
    policed = dataclasses.replace(policed, rows=RowFilter(paths, values))
    return execute(policed, interpretation=interpretation)


# The policy's view of a plan, under the names the compiled-statement tests read it by.
_column_masks = column_masks
_output_columns = output_columns


def _row_filter(stakeholder, customer_path: str) -> tuple[tuple, tuple]:
    """visible_customers_q as (ORM paths, values): ANDed equalities only (none for hq); anything
    else it may say one day is refused rather than half understood."""
    q = visible_customers_q(stakeholder, customer_path=customer_path)
    if q.negated or (q.connector != "AND" and len(q.children) > 1):
        raise ImproperlyConfigured("kb.vpd reads the row policy as ANDed equalities only")
    equalities = [child for child in q.children if isinstance(child, tuple)]
    if len(equalities) != len(q.children):
        raise ImproperlyConfigured("kb.vpd reads the row policy as ANDed equalities only")
    return tuple(path for path, _ in equalities), tuple(value for _, value in equalities)


def _fetch(connection, sql: str, params: list) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


# --- one statement per plan shape -------------------------------------------------------------


class _Shape(NamedTuple):
    """Everything the SQL depends on, and nothing a user typed: no value is in here."""

    using: str
    entity: str
    columns: tuple[str, ...]  # the answer's columns: fields, then aggregate aliases
    filters: tuple[tuple, ...]  # (field, op, value shape)
    group_by: tuple[str, ...]
    aggregates: tuple  # kb.plans.Aggregate (fn, field, alias)
    order_by: tuple  # kb.plans.OrderBy (key, descending)
    grouped: bool
    masks: tuple[tuple[str, Mask], ...]
    scope_paths: tuple[str, ...]  # the policy's row filter, by ORM path
    related: tuple = ()  # (entity, path, filters shape, exists, masks, counted) per condition


def _shape(
    plan: Plan,
    masks: dict,
    columns: Sequence[tuple[str, str]],
    scope_paths: tuple,
    using: str,
    related_masks=(),
) -> _Shape:
    return _Shape(
        using=using,
        entity=plan.entity,
        columns=tuple(name for name, _label in columns),
        filters=tuple((f.field, f.op, _value_shape(f.value)) for f in plan.filters),
        group_by=plan.group_by,
        aggregates=plan.aggregates,
        order_by=plan.order_by,
        grouped=plan.grouped,
        masks=tuple(masks.items()),
        scope_paths=scope_paths,
        related=tuple(
            (
                r.entity,
                plan.related_path(r),
                tuple((f.field, f.op, _value_shape(f.value)) for f in r.filters),
                r.exists,
                rmasks,
                r.at_least is not None,
            )
            for r, rmasks in zip(plan.related, related_masks, strict=True)
        ),
    )


def _value_shape(value: object):
    """What of a filter value changes the SQL: null, an open age band, a list's length."""
    if isinstance(value, tuple):
        return tuple(_value_shape(item) for item in value)
    if value is None:
        return "null"
    if isinstance(value, AgeBand):
        return "band" if value.hi is not None else "open band"
    return "value"


class _Request(NamedTuple):
    """What a statement's parameters are bound from."""

    plan: Plan
    scope: tuple  # the row filter's values, in the order of the shape's scope_paths
    as_of: dt.date
    connection: object


# A binder computes one parameter of the statement from the request, in placeholder order.
Binder = Callable[[_Request], object]


class _Compiled(NamedTuple):
    sql: str
    binders: tuple[Binder, ...]
    cells: tuple[tuple[str, Callable], ...]  # (column, fetched value -> JSON value), in order


class _Frag(NamedTuple):
    """A piece of SQL with its parameters' binders, in order of their placeholders."""

    sql: str
    binders: tuple = ()


def _join(separator: str, frags) -> _Frag:
    frags = list(frags)
    return _Frag(separator.join(f.sql for f in frags), tuple(b for f in frags for b in f.binders))


def _constant(value) -> Binder:
    return lambda r: value


_SYMBOLS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
# Pattern operators as the ORM path had them: (Django lookup, pattern around the escaped value).
_PATTERNS = {
    "contains": ("icontains", "%{}%"),
    # Case-insensitive like contains: SQLite's LIKE ignores ASCII case and PostgreSQL's does not,
    # and one question must give one answer on both.
    "startswith": ("istartswith", "{}%"),
    "endswith": ("iendswith", "%{}"),
}
_AGGREGATE_SQL = {"count": "COUNT", "sum": "SUM", "avg": "AVG", "min": "MIN", "max": "MAX"}
# What the ORM's output fields make of an aggregate: Count and Sum of integers are int, Avg of
# integers a float (PostgreSQL's AVG is numeric); Min and Max keep the column's type.
_AGGREGATE_PYTHON = {"count": int, "sum": int, "avg": float}


@functools.lru_cache(maxsize=COMPILED_SHAPES_MAX)
def _compile(shape: _Shape) -> _Compiled:
    return _Compiler(shape).compiled()


class _Compiler:
    """Writes the one statement for a shape: what the ORM path wrote, lookup by lookup.

    A `related` condition is written by a compiler of its own over the related entity's table,
    with its own table aliases (`alias`) and its filters read from that condition (`filters_of`).
    """

    def __init__(self, shape: _Shape, *, alias: str = "t", filters_of=None):
        self.shape = shape
        self.spec = ENTITIES[shape.entity]
        self.connection = connections[shape.using]
        self.quote = self.connection.ops.quote_name
        self.masks = dict(shape.masks)
        self.alias = alias
        self.filters_of = filters_of or (lambda plan: plan.filters)
        self.joins: dict[tuple[str, ...], tuple[str, str]] = {}  # ORM path prefix -> (alias, SQL)
        # Age is computed from the birth YEAR only when the role sees it that way (as before).
        names = [*shape.columns, *(f[0] for f in shape.filters), *shape.group_by]
        names += [a.field for a in shape.aggregates if a.field] + [o.key for o in shape.order_by]
        self.year_only = any(
            self.masks.get(name) is Mask.FROM_BIRTH_YEAR
            for name in names
            if name in self.spec.fields and self.spec.fields[name].derived
        )

    def compiled(self) -> _Compiled:
        shape, spec = self.shape, self.spec
        fields = [name for name in shape.columns if name in spec.fields]
        select = [self.selected(name) for name in fields]
        select += [self.aggregate(agg) for agg in shape.aggregates]
        where = [self.scope_condition(path, i) for i, path in enumerate(shape.scope_paths)]
        where += [self.condition(i, *item) for i, item in enumerate(shape.filters)]
        where += [self.related_condition(i, *item) for i, item in enumerate(shape.related)]
        tail: list[_Frag] = []
        if not shape.grouped:
            orders = [self.order(self.value(o.key), o.descending) for o in shape.order_by]
            orders.append(_Frag(f"{self.value(spec.key).sql} ASC"))
            tail = [_Frag(" ORDER BY "), _join(", ", orders)]
        elif shape.group_by:
            # Grouped and sorted by position in the select list: an expression with parameters
            # (age) would otherwise have to be written, and matched, twice.
            position = {name: i for i, name in enumerate(shape.columns, start=1)}
            keys = ", ".join(str(position[name]) for name in shape.group_by)
            orders = [self.order(_Frag(str(position[o.key])), o.descending) for o in shape.order_by]
            # Ties are broken by the group keys, so answers are stable across databases.
            orders += [self.order(_Frag(str(position[name])), False) for name in shape.group_by]
            tail = [_Frag(f" GROUP BY {keys} ORDER BY "), _join(", ", orders)]
        if not shape.grouped or shape.group_by:
            # One more row than the limit tells whether the answer was cut.
            tail.append(_Frag(" LIMIT %s", (lambda r: r.plan.limit + 1,)))
        table = f"{self.quote(spec.model._meta.db_table)} {self.alias}0"
        joins = "".join(f" {sql}" for _alias, sql in self.joins.values())
        parts = [_Frag("SELECT "), _join(", ", select), _Frag(f" FROM {table}{joins}")]
        if where:
            parts += [_Frag(" WHERE "), _join(" AND ", where)]
        statement = _join("", parts + tail)
        cells = tuple((name, self.cell(name)) for name in shape.columns)
        return _Compiled(statement.sql, statement.binders, cells)

    # columns and expressions

    def column(self, path: str):
        """(SQL, model field, may be null) of an ORM path, joining what it walks through."""
        model, alias, outer = self.spec.model, f"{self.alias}0", False
        parts = path.split("__")
        try:
            for depth, part in enumerate(parts[:-1], start=1):
                field = model._meta.get_field(part)
                if not (field.many_to_one and field.concrete):
                    raise ImproperlyConfigured(f"kb.vpd joins foreign keys only: {path}")
                outer = outer or field.null
                key = tuple(parts[:depth])
                if key not in self.joins:
                    target = f"{self.alias}{len(self.joins) + 1}"
                    join = "LEFT OUTER JOIN" if outer else "INNER JOIN"
                    table = self.quote(field.related_model._meta.db_table)
                    self.joins[key] = (
                        target,
                        f"{join} {table} {target} ON {alias}.{self.quote(field.column)}"
                        f" = {target}.{self.quote(field.target_field.column)}",
                    )
                alias, model = self.joins[key][0], field.related_model
            field = model._meta.get_field(parts[-1])
        except FieldDoesNotExist as exc:
            raise ImproperlyConfigured(f"kb.vpd cannot resolve the ORM path {path!r}") from exc
        return f"{alias}.{self.quote(field.column)}", field, outer or field.null

    def extract(self, part: str, column: str) -> _Frag:
        sql, params = self.connection.ops.date_extract_sql(part, column, ())
        return _Frag(sql, tuple(_constant(p) for p in params))

    def month_day(self, column: str) -> _Frag:
        """A date's "MM-DD", on the two databases the KB runs on."""
        if self.connection.vendor == "postgresql":
            return _Frag(f"to_char({column}, 'MM-DD')")
        if self.connection.vendor == "sqlite":
            return _Frag(f"strftime('%%m-%%d', {column})")
        raise ImproperlyConfigured(
            f"kb.vpd has no month-day expression for {self.connection.vendor}"
        )

    def age(self, path: str) -> _Frag:
        """Age at the as-of date: as-of year - birth year, less one before the birthday."""
        column = self.column(path)[0]
        year = self.extract("year", column)
        age = _join(
            "",
            [
                _Frag("(%s - CAST(", (lambda r: r.as_of.year,)),
                year,
                _Frag(" AS integer)"),
            ],
        )
        if not self.year_only:
            month, day = self.extract("month", column), self.extract("day", column)
            month_of = (lambda r: r.as_of.month,)
            day_of = (lambda r: r.as_of.day,)
            ahead = _join(
                "",
                [
                    _Frag(" - CASE WHEN ("),
                    month,
                    _Frag(" > %s OR (", month_of),
                    month,
                    _Frag(" = %s AND ", month_of),
                    day,
                    _Frag(" > %s)) THEN 1 ELSE 0 END", day_of),
                ],
            )
            age = _join("", [age, ahead])
        return _join("", [age, _Frag(")")])

    def value(self, name: str) -> _Frag:
        """A field's value expression."""
        field = self.spec.fields[name]
        if field.kind is Kind.AGE:
            return self.age(field.path)
        if field.kind is Kind.AGE_GROUP:
            return _join("", [_Frag("("), self.age(field.path), _Frag(" / 10 * 10)")])
        return _Frag(self.column(field.path)[0])

    def selected(self, name: str) -> _Frag:
        # A withheld column is shown as null whatever it holds: it is not read at all.
        return _Frag("NULL") if self.masks[name] is Mask.WITHHELD else self.value(name)

    def aggregate(self, agg) -> _Frag:
        argument = self.value(agg.field) if agg.field else _Frag("*")
        return _join("", [_Frag(f"{_AGGREGATE_SQL[agg.fn]}("), argument, _Frag(")")])

    def order(self, expression: _Frag, descending: bool) -> _Frag:
        direction = "DESC" if descending else "ASC"
        return _join("", [expression, _Frag(f" {direction} NULLS LAST")])

    def cell(self, name: str) -> Callable:
        """fetched value -> the answer's JSON value, with the column's mask (as kb.policy says)."""
        if name not in self.spec.fields:
            fn = next(a.fn for a in self.shape.aggregates if a.alias == name)
            python = _AGGREGATE_PYTHON.get(fn)
            # Aggregates are over comparable columns only: never masked.
            return (lambda v: v if v is None else json_value(python(v))) if python else json_value
        mask = self.masks[name]
        if self.spec.fields[name].kind is Kind.AGE_GROUP:
            return lambda v: v if v is None else json_value(mask_value(mask, f"{v}대"))
        if mask is Mask.FULL:
            return json_value  # mask_value(Mask.FULL, v) is v
        # SQLite returns dates as their ISO text, PostgreSQL as dates: json_value writes both as
        # the same text, and a YEAR_ONLY mask keeps the same four digits of either.
        return lambda v: json_value(mask_value(mask, v))

    # conditions

    def scope_condition(self, path: str, index: int) -> _Frag:
        column, field, _null = self.column(path)

        def bind(r):
            return field.get_db_prep_value(r.scope[index], r.connection)

        return _Frag(f"{column} = %s", (bind,))

    def condition(self, index: int, name: str, op: str, shape) -> _Frag:
        field = self.spec.fields[name]
        if field.kind is Kind.AGE_GROUP:
            return self.age_band_condition(index, op, shape, self.age(field.path))
        if field.kind is Kind.AGE:
            lhs, model_field, nullable = self.age(field.path), None, False
        else:
            column, model_field, nullable = self.column(field.path)
            lhs = _Frag(column)
        connection = self.connection  # for the SQL only; values are prepared per request

        def param(*position) -> Binder:
            def bind(r):
                value = self.filters_of(r.plan)[index].value
                for i in position:
                    value = value[i]
                if model_field is None:
                    return value
                return model_field.get_db_prep_value(value, r.connection)

            return bind

        if op in ("eq", "ne"):
            if shape == "null":
                test = _join("", [lhs, _Frag(" IS NULL")])
            else:
                test = _join("", [lhs, _Frag(" = %s", (param(),))])
            return self.negated(test, lhs, nullable and shape != "null") if op == "ne" else test
        if op in ("in", "not_in"):
            marks = ", ".join(["%s"] * len(shape))
            test = _join(
                "", [lhs, _Frag(f" IN ({marks})", tuple(param(i) for i in range(len(shape))))]
            )
            return self.negated(test, lhs, nullable) if op == "not_in" else test
        if op in ("month_day_between", "month_day_in"):
            # The month and day of a date in any year ("MM-DD"), compared as text.
            month_day = self.month_day(lhs.sql)
            values = tuple(
                (lambda r, i=i: self.filters_of(r.plan)[index].value[i]) for i in range(len(shape))
            )
            if op == "month_day_between":
                return _join("", [month_day, _Frag(" BETWEEN %s AND %s", values)])
            return _join("", [month_day, _Frag(f" IN ({', '.join(['%s'] * len(shape))})", values)])
        if op == "between":
            return _join("", [lhs, _Frag(" BETWEEN %s AND %s", (param(0), param(1)))])
        if op in _PATTERNS:
            lookup, pattern = _PATTERNS[op]
            ops = connection.ops
            assert model_field is not None  # text patterns are on columns, never a computed age
            cast = ops.lookup_cast(lookup, model_field.get_internal_type())
            # Every backend's wrapper defines operators; BaseDatabaseWrapper's stub does not.
            rhs = connection.operators[lookup]  # type: ignore[attr-defined]

            def like(r):
                text = r.connection.ops.prep_for_like_query(self.filters_of(r.plan)[index].value)
                return pattern.format(text)

            return _Frag(f"{cast % lhs.sql} {rhs}", (*lhs.binders, like))
        if op in _SYMBOLS:
            return _join("", [lhs, _Frag(f" {_SYMBOLS[op]} %s", (param(),))])
        raise PlanError(  # fail closed
            gettext("알 수 없는 연산자입니다: %(op)s") % {"op": repr(op)}, code="unknown_op"
        )

    def related_condition(
        self, index: int, entity, path, filters, exists, masks, counted=False
    ) -> _Frag:
        """[NOT] EXISTS (the related rows of this row that match the related filters), or their
        number compared with the plan's `at_least` ("계약이 2건 이상인 고객")."""
        inner_shape = self.shape._replace(
            entity=entity, columns=(), filters=filters, group_by=(), aggregates=(), order_by=(),
            grouped=False, masks=masks, scope_paths=(), related=(),
        )  # fmt: skip
        inner = _Compiler(
            inner_shape,
            alias=f"r{index}_",
            filters_of=lambda plan, index=index: plan.related[index].filters,
        )
        link = inner.column(path)[0]
        own_key = self.column(self.spec.fields[self.spec.key].path)[0]
        where = [_Frag(f"{link} = {own_key}")]
        where += [inner.condition(i, *item) for i, item in enumerate(filters)]
        table = f"{self.quote(inner.spec.model._meta.db_table)} {inner.alias}0"
        joins = "".join(f" {sql}" for _alias, sql in inner.joins.values())
        if counted:

            def at_least(r, index=index):
                return r.plan.related[index].at_least

            return _join(
                "",
                # Table and column names come from the models, never from the question.
                [_Frag(f"(SELECT COUNT(*) FROM {table}{joins} WHERE "),  # noqa: S608
                 _join(" AND ", where),
                 _Frag(") >= %s", (at_least,))],
            )  # fmt: skip
        keyword = "EXISTS" if exists else "NOT EXISTS"
        return _join(
            "",
            # Table and column names come from the models, never from the question.
            [_Frag(f"{keyword} (SELECT 1 FROM {table}{joins} WHERE "),  # noqa: S608
             _join(" AND ", where),
             _Frag(")")],
        )  # fmt: skip

    @staticmethod
    def negated(test: _Frag, lhs: _Frag, nullable: bool) -> _Frag:
        # As the ORM negates a lookup on a column that may be null: rows with null match.
        if nullable:
            return _join("", [_Frag("NOT ("), test, _Frag(" AND "), lhs, _Frag(" IS NOT NULL)")])
        return _join("", [_Frag("NOT ("), test, _Frag(")")])

    def age_band_condition(self, index: int, op: str, shape, age: _Frag) -> _Frag:
        """Age groups compare the age with the band's bounds ("60대 이상" has no upper one)."""

        def bound(end: str, *position) -> Binder:
            def bind(r):
                band = self.filters_of(r.plan)[index].value
                for i in position:
                    band = band[i]
                return getattr(band, end)

            return bind

        def compare(symbol: str, end: str, *position) -> _Frag:
            return _join("", [age, _Frag(f" {symbol} %s", (bound(end, *position),))])

        def within(band_shape, *position) -> _Frag:
            low = compare(">=", "lo", *position)
            if band_shape == "open band":
                return low
            return _join(
                "", [_Frag("("), low, _Frag(" AND "), compare("<=", "hi", *position), _Frag(")")]
            )

        if op in ("eq", "ne"):
            test = within(shape)
            return _join("", [_Frag("NOT ("), test, _Frag(")")]) if op == "ne" else test
        if op in ("in", "not_in"):
            test = _join(" OR ", [within(s, i) for i, s in enumerate(shape)])
            test = _join("", [_Frag("("), test, _Frag(")")])
            return _join("", [_Frag("NOT "), test]) if op == "not_in" else test
        if op == "between":
            low = compare(">=", "lo", 0)
            if shape[1] == "open band":
                return low
            return _join("", [_Frag("("), low, _Frag(" AND "), compare("<=", "hi", 1), _Frag(")")])
        if op == "gt":
            return compare(">", "hi") if shape == "band" else _Frag("1 = 0")  # nothing is older
        if op == "gte":
            return compare(">=", "lo")
        if op == "lt":
            return compare("<", "lo")
        if op == "lte":
            return compare("<=", "hi") if shape == "band" else _Frag("1 = 1")  # everyone is
        raise PlanError(  # fail closed
            gettext("알 수 없는 연산자입니다: %(op)s") % {"op": repr(op)}, code="unknown_op"
        )


# --- database context -------------------------------------------------------------------------


@contextmanager
def _reader_context(stakeholder: StakeholderSnapshot | Stakeholder) -> Iterator[None]:
    """A transaction (or savepoint) that reads as the stakeholder and is always rolled back.

    It only reads, and the rollback is what ends SET LOCAL ROLE and the RLS context, even when this
    block is a savepoint inside a caller's transaction; a pooled connection carries nothing on.
    """
    using = router.db_for_read(Customer)
    connection = connections[using]
    if connection.vendor != "postgresql":
        # No database-side context to scope here, and on SQLite a transaction would take the
        # write lock (IMMEDIATE mode), queueing every read behind audit writes.
        table = connection.ops.quote_name(Stakeholder._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT role, branch_id, status FROM {table} WHERE stakeholder_id = %s",  # noqa: S608
                [stakeholder.stakeholder_id],
            )
            stored = cursor.fetchone()
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


def _set_postgres_context(
    connection, stakeholder: StakeholderSnapshot | Stakeholder
) -> tuple | None:
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
                [role, CONTEXT_STAKEHOLDER, stakeholder.stakeholder_id, stakeholder.stakeholder_id],
            )
            row = cursor.fetchone()
    except DatabaseError as exc:
        raise ImproperlyConfigured(
            f"KB reads cannot switch to the database role {role!r}; "
            "run `manage.py setup_kb_db_role` as a database administrator"
        ) from exc
    return None if row[2] is None else tuple(row[2:])


def _recheck_stakeholder(
    stakeholder: StakeholderSnapshot | Stakeholder, stored: tuple | None
) -> None:
    """Decide on the stored stakeholder row, not on an object that may be stale or made up."""
    if stored is None:
        raise PolicyRefused(
            gettext("알 수 없는 사용자입니다: 조회 권한 없음"), reason="unknown_stakeholder"
        )
    if tuple(stored) != (stakeholder.role, stakeholder.branch_id, stakeholder.status):
        role, branch_id, status = stored
        # Suspended (or otherwise barred) since it was read: refused for that, in so many words.
        refusal = query_refusal(role=role, status=status, branch_id=branch_id)
        if refusal is not None:
            raise refusal
        raise PolicyRefused(
            gettext("사용자 정보가 바뀌었습니다: 조회 권한 없음 (다시 시도하세요)"),
            reason="stale_stakeholder",
        )
