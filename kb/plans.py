"""KB query plans: the structured, validated form of a question that the data layer executes.

A plan names an entity, fields, typed filters, grouping, aggregates, sort and limit; never SQL.
`plan_parse` turns the parser's JSON-shaped dict into a `Plan` or raises `PlanError`, whose message
is in the active language (the question's, under kb.answering).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from django.utils.translation import get_language
from django.utils.translation import gettext as _

from core import tracing
from kb import catalogue
from kb.catalogue import ENTITIES, MAX_LIMIT, EntitySpec, FieldSpec, Kind
from kb.catalogue import PLAN_DEFAULT_LIMIT as DEFAULT_LIMIT
from kb.errors import KbError
from kb.josa import josa_in

__all__ = ["ENTITIES", "MAX_LIMIT", "DEFAULT_LIMIT", "EntitySpec", "FieldSpec", "Kind"]

MAX_FILTERS = 20
MAX_IN_VALUES = 100
MAX_GROUP_BY = 5
MAX_AGGREGATES = 10
MAX_ORDER_BY = 5
MAX_STRING = 100
MAX_ABS_INT = 10**15

OPS = (
    "eq",
    "ne",
    "in",
    "not_in",
    "gt",
    "gte",
    "lt",
    "lte",
    "between",
    "contains",
    "startswith",
    "endswith",
    "month_day_between",  # a date's month and day, in any year: ["03-01", "03-31"] (birthdays)
    "month_day_in",  # one of these month-days, in any year: ["02-11"], every 12th
)
AGGREGATE_FNS = ("count", "sum", "avg", "min", "max")
PLAN_KEYS = (
    "entity", "fields", "filters", "group_by", "aggregates", "order_by", "limit", "related"
)  # fmt: skip
MAX_RELATED = 3
MAX_RELATED_COUNT = 1000  # "계약이 N건 이상인": a count no customer reaches is still a count
# Which entity's rows a plan's row may be asked to have (or lack), and the ORM path from those
# rows back to it: a customer's contracts and payments, a contract's payments.
RELATED_PATHS: dict[tuple[str, str], str] = {
    ("customers", "contracts"): "customer",
    ("customers", "premium_payments"): "contract__customer",
    ("contracts", "premium_payments"): "contract",
}

_ALIAS = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MONTH = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")
_AGE_GROUP = re.compile(r"^(\d{1,2})0대( 이상)?$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class PlanError(KbError, ValueError):
    """The plan is malformed or names something unknown; the message is for the user."""

    def __init__(self, message: str, *, code: str = "invalid_plan"):
        super().__init__(message, reason="invalid_plan")
        self.code = code


_TEXT_OPS = frozenset({"contains", "startswith", "endswith"})
MONTH_DAY_OPS = frozenset({"month_day_between", "month_day_in"})
_OPS_BY_KIND: dict[Kind, frozenset[str]] = {
    Kind.STR: frozenset(OPS) - MONTH_DAY_OPS,
    Kind.DATE: frozenset(OPS) - _TEXT_OPS,
    **{
        kind: frozenset(OPS) - _TEXT_OPS - MONTH_DAY_OPS
        for kind in Kind
        if kind not in (Kind.STR, Kind.DATE)
    },
}
_MONTH_DAY = re.compile(r"^(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])$")
_SUMMABLE = frozenset({Kind.INT, Kind.AGE})
_ORDERABLE_AGGREGATE = frozenset({Kind.STR, Kind.INT, Kind.DATE, Kind.MONTH, Kind.AGE})

_AGGREGATE_LABELS = {"sum": "합계", "avg": "평균", "min": "최소", "max": "최대", "count": "건수"}
_AGGREGATE_LABELS_EN = {"sum": "total", "avg": "average", "min": "lowest", "max": "highest",
                        "count": "count"}  # fmt: skip


@dataclass(frozen=True)
class AgeBand:
    """An age group value: ages lo..hi inclusive (hi None: "60대 이상")."""

    lo: int
    hi: int | None

    @property
    def label(self) -> str:
        return f"{self.lo}대" if self.hi is not None else f"{self.lo}대 이상"


@dataclass(frozen=True)
class Filter:
    field: str
    op: str
    value: Any  # typed: str, int, date, AgeBand, None, or a tuple of those for in/not_in/between


@dataclass(frozen=True)
class Aggregate:
    fn: str
    field: str | None
    alias: str


@dataclass(frozen=True)
class OrderBy:
    key: str  # a field, or (grouped plans) an aggregate alias
    descending: bool = False


@dataclass(frozen=True)
class Related:
    """Rows of `entity` linked to the plan's row that match `filters`: the row is kept when such
    rows exist (exists=True, "계약이 있는 고객"), when none does ("미납이 없는 고객"), or when at
    least `at_least` do ("계약이 2건 이상인 고객")."""

    entity: str
    filters: tuple[Filter, ...]
    exists: bool
    at_least: int | None = None


@dataclass(frozen=True)
class Plan:
    entity: str
    fields: tuple[str, ...] = ()
    filters: tuple[Filter, ...] = ()
    group_by: tuple[str, ...] = ()
    aggregates: tuple[Aggregate, ...] = ()
    order_by: tuple[OrderBy, ...] = ()
    limit: int = DEFAULT_LIMIT
    related: tuple[Related, ...] = ()

    @property
    def spec(self) -> EntitySpec:
        return ENTITIES[self.entity]

    def related_path(self, related: Related) -> str:
        return RELATED_PATHS[(self.entity, related.entity)]

    @property
    def grouped(self) -> bool:
        return bool(self.group_by or self.aggregates)

    def referenced_fields(self) -> dict[str, str]:
        """Every field the plan uses -> how ("select", or "filter"/"group"/"aggregate"/"sort")."""
        used: dict[str, str] = {name: "select" for name in self.fields}
        for item in self.filters:
            used[item.field] = "filter"
        for name in self.group_by:
            used[name] = "group"
        for agg in self.aggregates:
            if agg.field:
                used[agg.field] = "aggregate"
        aliases = {agg.alias for agg in self.aggregates}
        for order in self.order_by:
            if order.key not in aliases:
                used[order.key] = "sort"
        return used

    def as_dict(self) -> dict:
        """The normalised plan in the input's JSON shape (clamped limit, typed values as text)."""
        related = [
            {
                "entity": r.entity,
                "filters": [
                    {"field": f.field, "op": f.op, "value": _value_json(f.value)} for f in r.filters
                ],
                "exists": r.exists,
                **({"at_least": r.at_least} if r.at_least is not None else {}),
            }
            for r in self.related
        ]
        return {
            "entity": self.entity,
            "fields": list(self.fields),
            "filters": [
                {"field": f.field, "op": f.op, "value": _value_json(f.value)} for f in self.filters
            ],
            "group_by": list(self.group_by),
            "aggregates": [{"fn": a.fn, "field": a.field, "as": a.alias} for a in self.aggregates],
            "order_by": [
                {"field": o.key, "direction": "desc" if o.descending else "asc"}
                for o in self.order_by
            ],
            "limit": self.limit,
            **({"related": related} if related else {}),
        }


def aggregate_label(plan: Plan, aggregate: Aggregate) -> str:
    """The aggregate's column label in the active language ("월 보험료 합계", "total monthly
    premium")."""
    english = (get_language() or "").startswith("en")
    if aggregate.field is None:
        return "count" if english else "건수"
    label = plan.spec.fields[aggregate.field].label_in(get_language())
    if english:
        return f"{_AGGREGATE_LABELS_EN[aggregate.fn]} {label}"
    return f"{label} {_AGGREGATE_LABELS[aggregate.fn]}"


def default_alias(fn: str, field: str | None) -> str:
    if field is None:
        return "count"
    if fn == "sum":
        return f"total_{field}"
    return f"{fn}_{field}"


def clamp_limit(value: object) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlanError(_("limit은 정수여야 합니다 (1~100)."), code="bad_limit")
    return catalogue.clamp_limit(value, default=DEFAULT_LIMIT)


@tracing.traced("kb.plan_parse")
def plan_parse(raw: object) -> Plan:
    """Validate the parser's plan dict; raise PlanError naming the first problem."""
    if not isinstance(raw, dict):
        raise PlanError(_("질의 계획은 JSON 객체여야 합니다."))
    unknown = sorted(str(key) for key in raw if key not in PLAN_KEYS)
    if unknown:
        raise PlanError(_("알 수 없는 계획 항목입니다: %(keys)s") % {"keys": ", ".join(unknown)})
    entity_name = raw.get("entity")
    if not isinstance(entity_name, str) or entity_name not in ENTITIES:
        raise PlanError(
            _("알 수 없는 조회 대상입니다: %(entity)s (가능한 대상: %(entities)s)")
            % {"entity": _show(entity_name), "entities": ", ".join(ENTITIES)},
            code="unknown_entity",
        )
    spec = ENTITIES[entity_name]

    group_by = _names(spec, raw.get("group_by"), "group_by", MAX_GROUP_BY)
    aggregates = _aggregates(spec, raw.get("aggregates"), group_by)
    grouped = bool(group_by or aggregates)
    fields = _names(spec, raw.get("fields"), "fields", len(spec.fields))
    if grouped:
        extra = [name for name in fields if name not in group_by]
        if extra:
            raise PlanError(
                _("집계 질의에서는 group_by에 있는 필드만 선택할 수 있습니다: %(fields)s")
                % {"fields": ", ".join(extra)}
            )
        fields = ()
    filters = _filters(spec, raw.get("filters"))
    order_by = _order_by(spec, raw.get("order_by"), group_by, aggregates, grouped)
    related = _related(spec, raw.get("related"))
    return Plan(
        entity=entity_name,
        fields=fields,
        filters=filters,
        group_by=group_by,
        aggregates=aggregates,
        order_by=order_by,
        limit=clamp_limit(raw.get("limit")),
        related=related,
    )


# --- parts ----------------------------------------------------------------------------------


def _list(value: object, what: str, cap: int) -> list:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        what = josa_in(get_language(), what, "은/는")
        raise PlanError(_("%(what)s 목록이어야 합니다.") % {"what": what})
    if len(value) > cap:
        raise PlanError(
            _("%(what)s 항목이 너무 많습니다 (최대 %(cap)s개).") % {"what": what, "cap": cap},
            code="too_many",
        )
    return list(value)


def _field(spec: EntitySpec, name: object, what: str) -> FieldSpec:
    if isinstance(name, str) and name in spec.fields:
        return spec.fields[name]
    raise PlanError(
        _(
            "%(entity)s(%(name)s)에 없는 필드입니다: %(field)s (%(what)s). "
            "쓸 수 있는 필드: %(fields)s"
        )
        % {
            "entity": spec.label_in(get_language()),
            "name": spec.name,
            "field": _show(name),
            "what": what,
            "fields": ", ".join(spec.fields),
        },
        code="unknown_field",
    )


def _names(spec: EntitySpec, value: object, what: str, cap: int) -> tuple[str, ...]:
    names = [_field(spec, name, what).name for name in _list(value, what, cap)]
    return tuple(dict.fromkeys(names))


def _dict(item: object, keys: tuple[str, ...], what: str) -> dict:
    if not isinstance(item, dict):
        raise PlanError(_("%(what)s 항목은 JSON 객체여야 합니다.") % {"what": what})
    unknown = sorted(str(key) for key in item if key not in keys)
    if unknown:
        raise PlanError(
            _("%(what)s 항목에 알 수 없는 키가 있습니다: %(keys)s")
            % {"what": what, "keys": ", ".join(unknown)}
        )
    return item


def _aggregates(spec: EntitySpec, value: object, group_by: tuple[str, ...]):
    result: list[Aggregate] = []
    for item in _list(value, "aggregates", MAX_AGGREGATES):
        item = _dict(item, ("fn", "field", "as"), "aggregates")
        fn = item.get("fn")
        if fn not in AGGREGATE_FNS:
            raise PlanError(
                _("알 수 없는 집계 함수입니다: %(fn)s (가능: %(fns)s)")
                % {"fn": _show(fn), "fns": ", ".join(AGGREGATE_FNS)},
                code="unknown_aggregate",
            )
        field = item.get("field")
        if field is None:
            if fn != "count":
                raise PlanError(_("%(fn)s 집계에는 필드가 필요합니다.") % {"fn": fn})
        else:
            kind = _field(spec, field, "aggregates").kind
            if fn in ("sum", "avg") and kind not in _SUMMABLE:
                raise PlanError(
                    _("%(fn)s 집계는 숫자 필드에만 쓸 수 있습니다: %(field)s")
                    % {"fn": fn, "field": field}
                )
            if fn in ("min", "max") and kind not in _ORDERABLE_AGGREGATE:
                raise PlanError(
                    _("%(fn)s 집계를 이 필드에 쓸 수 없습니다: %(field)s")
                    % {"fn": fn, "field": field}
                )
        alias = item.get("as") or default_alias(fn, field)
        if not isinstance(alias, str) or not _ALIAS.match(alias):
            raise PlanError(
                _("집계 별칭이 올바르지 않습니다: %(alias)s (영문 소문자·숫자·_)")
                % {"alias": _show(alias)}
            )
        if alias in spec.fields or any(a.alias == alias for a in result):
            raise PlanError(
                _("집계 별칭이 필드명이나 다른 별칭과 겹칩니다: %(alias)s") % {"alias": alias}
            )
        result.append(Aggregate(fn=fn, field=field, alias=alias))
    return tuple(result)


def _filters(spec: EntitySpec, value: object) -> tuple[Filter, ...]:
    result = []
    for item in _list(value, "filters", MAX_FILTERS):
        item = _dict(item, ("field", "op", "value"), "filters")
        field = _field(spec, item.get("field"), "filters")
        op = item.get("op")
        if op not in OPS:
            raise PlanError(
                _("알 수 없는 연산자입니다: %(op)s (가능: %(ops)s)")
                % {"op": _show(op), "ops": ", ".join(OPS)},
                code="unknown_op",
            )
        if op not in _OPS_BY_KIND[field.kind]:
            raise PlanError(
                _("%(label)s(%(field)s) 필드에는 %(op)s 연산을 쓸 수 없습니다.")
                % {**_named(field), "op": op}
            )
        if "value" not in item:
            raise PlanError(_("%(field)s 조건에 값(value)이 없습니다.") % {"field": field.name})
        value = _filter_value(field, op, item["value"])
        result.append(Filter(field=field.name, op=op, value=value))
    return tuple(result)


def _related(spec: EntitySpec, value: object) -> tuple[Related, ...]:
    result = []
    for item in _list(value, "related", MAX_RELATED):
        item = _dict(item, ("entity", "filters", "exists", "at_least"), "related")
        name = item.get("entity")
        if (spec.name, name) not in RELATED_PATHS or not isinstance(name, str):
            raise PlanError(
                _("%(entity)s 행에는 %(related)s 행을 연결할 수 없습니다.")
                % {"entity": spec.name, "related": _show(name)},
                code="unknown_entity",
            )
        exists = item.get("exists", True)
        if not isinstance(exists, bool):
            raise PlanError(_("related의 exists는 true 또는 false여야 합니다."))
        at_least = item.get("at_least")
        if at_least is not None and (
            type(at_least) is not int or not 1 <= at_least <= MAX_RELATED_COUNT or not exists
        ):
            raise PlanError(
                _("related의 at_least는 exists가 true일 때 1~%(max)s의 정수여야 합니다.")
                % {"max": MAX_RELATED_COUNT}
            )
        result.append(Related(entity=name, filters=_filters(ENTITIES[name], item.get("filters")),
                              exists=exists, at_least=at_least))  # fmt: skip
    return tuple(result)


def _filter_value(field: FieldSpec, op: str, raw: object):
    if op in MONTH_DAY_OPS:
        return _month_days(field, op, raw)
    if op in ("in", "not_in"):
        if not isinstance(raw, list | tuple) or not raw:
            raise PlanError(
                _("%(op)s 조건의 값은 비어 있지 않은 목록이어야 합니다: %(field)s")
                % {"op": op, "field": field.name}
            )
        if len(raw) > MAX_IN_VALUES:
            raise PlanError(
                _("%(op)s 목록의 값이 너무 많습니다 (최대 %(cap)s개): %(field)s")
                % {"op": op, "cap": MAX_IN_VALUES, "field": field.name},
                code="too_many",
            )
        return tuple(dict.fromkeys(_scalar(field, item) for item in raw))
    if op == "between":
        if not isinstance(raw, list | tuple) or len(raw) != 2:
            raise PlanError(
                _("between 조건의 값은 [시작, 끝] 두 개여야 합니다: %(field)s")
                % {"field": field.name}
            )
        lo, hi = (_scalar(field, item) for item in raw)
        lo_key = lo.lo if isinstance(lo, AgeBand) else lo
        hi_key = hi.lo if isinstance(hi, AgeBand) else hi
        if lo_key > hi_key:
            raise PlanError(
                _("between 범위의 시작이 끝보다 큽니다: %(field)s") % {"field": field.name}
            )
        return (lo, hi)
    if raw is None:
        if op in ("eq", "ne") and field.nullable:
            return None
        raise PlanError(_("%(label)s(%(field)s) 조건에 값이 없습니다.") % _named(field))
    return _scalar(field, raw)


def _month_days(field: FieldSpec, op: str, raw: object) -> tuple[str, ...]:
    """ "MM-DD" texts: two for month_day_between (in order), one or more for month_day_in."""
    values = raw if isinstance(raw, list | tuple) else None
    wrong = (
        values is None
        or not values
        or len(values) > MAX_IN_VALUES
        or (op == "month_day_between" and len(values) != 2)
        or not all(isinstance(v, str) and _MONTH_DAY.match(v) for v in values)
    )
    if values is None or wrong:
        raise PlanError(
            _('%(op)s 조건의 값은 "MM-DD" 목록이어야 합니다: %(field)s')
            % {"op": op, "field": field.name}
        )
    if op == "month_day_between" and values[0] > values[1]:
        raise PlanError(_("between 범위의 시작이 끝보다 큽니다: %(field)s") % {"field": field.name})
    if op == "month_day_between":
        return tuple(values)  # both ends, even when they are one day: BETWEEN binds two values
    return tuple(dict.fromkeys(values))


def _scalar(field: FieldSpec, raw: object):
    kind = field.kind
    if kind in (Kind.INT, Kind.AGE):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise PlanError(
                _("%(label)s(%(field)s) 값은 정수여야 합니다: %(value)s")
                % {**_named(field), "value": _show(raw)}
            )
        if abs(raw) > MAX_ABS_INT:
            raise PlanError(_("%(label)s(%(field)s) 값이 너무 큽니다.") % _named(field))
        return raw
    if not isinstance(raw, str):
        raise PlanError(
            _("%(label)s(%(field)s) 값은 문자열이어야 합니다: %(value)s")
            % {**_named(field), "value": _show(raw)}
        )
    if len(raw) > MAX_STRING or _CONTROL.search(raw):
        raise PlanError(
            _("%(label)s(%(field)s) 값이 너무 길거나 제어 문자를 담고 있습니다.") % _named(field)
        )
    if kind is Kind.DATE:
        try:
            if not _DATE.match(raw):
                raise ValueError
            return dt.date.fromisoformat(raw)
        except ValueError:
            raise PlanError(
                _("%(label)s(%(field)s) 값은 YYYY-MM-DD 날짜여야 합니다: %(value)s")
                % {**_named(field), "value": _show(raw)}
            ) from None
    if kind is Kind.MONTH:
        if not _MONTH.match(raw):
            raise PlanError(
                _("%(label)s(%(field)s) 값은 YYYY-MM 월이어야 합니다: %(value)s")
                % {**_named(field), "value": _show(raw)}
            )
        return raw
    if kind is Kind.AGE_GROUP:
        match = _AGE_GROUP.match(raw.strip())
        if not match:
            raise PlanError(
                _("연령대 값은 '30대'처럼 써야 합니다: %(value)s") % {"value": _show(raw)}
            )
        lo = int(match.group(1)) * 10
        return AgeBand(lo=lo, hi=None if match.group(2) else lo + 9)
    return raw


def _order_by(spec, value, group_by, aggregates, grouped) -> tuple[OrderBy, ...]:
    aliases = {agg.alias for agg in aggregates}
    result: list[OrderBy] = []
    for item in _list(value, "order_by", MAX_ORDER_BY):
        item = _dict(item, ("field", "direction"), "order_by")
        key = item.get("field")
        direction = item.get("direction") or "asc"
        if not isinstance(direction, str) or direction.lower() not in ("asc", "desc"):
            raise PlanError(
                _("정렬 방향은 asc 또는 desc여야 합니다: %(direction)s")
                % {"direction": _show(direction)}
            )
        if grouped:
            if key not in aliases and key not in group_by:
                raise PlanError(
                    _("집계 질의는 group_by 필드나 집계 별칭으로만 정렬할 수 있습니다: %(key)s")
                    % {"key": _show(key)},
                    code="unknown_field",
                )
        else:
            _field(spec, key, "order_by")
        assert isinstance(key, str)  # both branches above refuse anything else
        if any(o.key == key for o in result):
            continue
        result.append(OrderBy(key=key, descending=direction.lower() == "desc"))
    return tuple(result)


def _named(field: FieldSpec) -> dict[str, str]:
    return {"label": field.label_in(get_language()), "field": field.name}


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _value_json(value: object):
    if isinstance(value, tuple):
        return [_value_json(item) for item in value]
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, AgeBand):
        return value.label
    return value
