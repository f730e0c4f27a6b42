"""Does a plan carry what the question says, and nothing it does not? Each check compares one
kind of thing the proof-reader read (kb.proof.quantities, kb.proof.periods, kb.proof.words) with
the plan's conditions and returns a Disagreement for each that the plan does not carry with the
same value and direction, or that the plan carries without the question saying it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass

from kb.catalogue import (
    CONTRACT_STATUSES,
    ENTITIES,
    IN_FORCE_STATUS,
    VALUE_GLOSSES,
    Kind,
    in_force_by_default,
)
from kb.josa import josa

from . import periods, words
from .periods import Window
from .quantities import (
    AFTER,
    AGE,
    BAND,
    BEFORE,
    COUNT,
    DECADE,
    DOWN,
    EXACT,
    UNTIL,
    UP,
    WON,
    Quantity,
)

MONEY_FIELDS = ("monthly_premium", "sum_insured", "amount")
_OPS_OF = {UP: {"gte", "gt"}, DOWN: {"lte", "lt"}, EXACT: {"eq", "in"}, BAND: {"gte"}}


@dataclass(frozen=True)
class Disagreement:
    """One thing the two readings do not agree on, in words for the asker."""

    words: str  # the question's words, as written ("" for something the plan added)
    read_ko: str  # how the proof-reader read them, or what the plan added
    read_en: str
    rewrite: str | None = None  # the words as the reader reads them without doubt ("15,000,000원")
    span: tuple[int, int] | None = None  # where the words (with their comparison) stand


def conditions(plan: dict) -> list[dict]:
    """The plan's conditions, its own and those on related rows."""
    out = list(plan.get("filters") or [])
    for related in plan.get("related") or []:
        out += related.get("filters") or []
    return out


def _values(item: dict) -> list:
    value = item["value"]
    return list(value) if isinstance(value, list | tuple) else [value]


# -- amounts -------------------------------------------------------------------------------------


def money(text: str, plan: dict, numbers: list[Quantity]) -> Iterator[Disagreement]:
    english = words.english(text)
    amounts = [q for q in numbers if _is_money(q, text)]
    filters = [c for c in conditions(plan) if c["field"] in MONEY_FIELDS]
    for q in amounts:
        matching = [c for c in filters if q.value in _values(c)]
        read = _read(q, english)
        total = _OF_A_TOTAL.search(text[: q.start])
        if total and matching:  # "총액이 10만원 넘는": a condition on a sum, not on each row
            yield Disagreement(
                f"{total.group(1)} {q.words}",
                f"'{total.group(1)}'에 대한 조건 {josa(q.shown(False), '을/를')} "
                "한 건 한 건의 금액으로 읽었습니다",
                f"read the condition on the {total.group(1)} ({q.shown(True)}) as one on each row",
            )
            continue
        if not matching:
            yield Disagreement(q.words, *read, _rewrite(q, english), _word_span(text, q))
        elif q.direction in _OPS_OF and not any(
            c["op"] in _OPS_OF[q.direction] or c["op"] == "between" for c in matching
        ):
            yield Disagreement(q.words, *read, _rewrite(q, english), _word_span(text, q))
    said = {q.value for q in numbers} | {q.value + _place(q.value) for q in amounts}
    for c in filters:
        for value in _values(c):
            if isinstance(value, int) and value not in said:
                label = ENTITIES[plan["entity"]].fields.get(c["field"])
                name = label.label if label else c["field"]
                yield Disagreement(
                    "",
                    f"질문에 없는 조건({name} {value:,}원)",
                    f"a condition the question does not state ({name} {value:,} won)",
                )


def _word_span(text: str, q: Quantity) -> tuple[int, int]:
    """The quantity with its comparison, to the end of the word ("10만원 안 되는")."""
    end = q.end
    while end < len(text) and not text[end].isspace():
        end += 1
    return q.start, end


_OF_A_TOTAL = re.compile(
    r"(총액|합계|총\s?금액|총\s?납입액|평균|total|sum|average)\s?(?:이|가|은|는|of)?\s*$", re.I
)


def _is_money(q: Quantity, text: str) -> bool:
    if q.unit == WON:
        return True
    if q.unit is not None:
        return False
    money_word = words.MONEY_WORDS.search(text) is not None
    return q.value >= 1000 and not 1900 <= q.value <= 2999 and (money_word or q.spelled)


def _place(value: int) -> int:
    """6만 -> 1만: the step of a band ("6만원대" is 60,000 up to 70,000)."""
    place = 1
    while value and value % (place * 10) == 0:
        place *= 10
    return place


_DIRECTION_KO = {UP: "이상", DOWN: "이하", EXACT: "정확히", BAND: "대", None: ""}


def quoted(word: object, pair: str) -> str:
    """The question's words quoted, with the particle that fits them ("'3천'을")."""
    return josa(f"'{word}'", pair)


_DIRECTION_EN = {UP: "or more", DOWN: "or less", EXACT: "exactly", BAND: "band", None: ""}


def _read(q: Quantity, english: bool) -> tuple[str, str]:
    direction = _DIRECTION_KO.get(q.direction, "") if q.direction else ""
    read_as = josa(f"{q.shown(False)} {direction}".strip(), "으로/로")
    ko = f"{quoted(q.words, '을/를')} {read_as} 읽었습니다"
    en = f"read '{q.words}' as {q.shown(True)}{' ' + _DIRECTION_EN[q.direction] if q.direction in _DIRECTION_EN and q.direction else ''}"  # noqa: E501
    return ko, en


def _rewrite(q: Quantity, english: bool) -> str:
    if english:
        return {UP: "at least ", DOWN: "at most ", EXACT: "exactly "}.get(
            q.direction or "", ""
        ) + f"{q.value:,} won"
    suffix = {UP: " 이상", DOWN: " 이하", EXACT: "", BAND: "대"}.get(q.direction or "", "")
    return f"{q.value:,}원{suffix}"


# -- ages ----------------------------------------------------------------------------------------


def ages(text: str, plan: dict, numbers: list[Quantity]) -> Iterator[Disagreement]:
    english = words.english(text)
    said = [q for q in numbers if q.unit in (AGE, DECADE)]
    filters = [c for c in conditions(plan) if c["field"] in ("age", "age_group")]
    for q in said:
        if not any(_age_carried(q, c) for c in filters):
            yield Disagreement(q.words, *_read(q, english))
    for q in numbers:  # "over 60", "60 and up": a bare number compared, on an age
        carried = [c for c in filters if c["field"] == "age" and q.value in _values(c)]
        if q.unit is None and q.direction in (UP, DOWN) and carried:
            if not any(c["op"] in _OPS_OF[q.direction] or c["op"] == "between" for c in carried):
                yield Disagreement(q.words, *_read(q, english))
    elderly = words.ELDERLY.search(text)
    if elderly and not filters:
        yield Disagreement(
            elderly.group(0),
            f"{quoted(elderly.group(0), '은/는')} 나이를 정하지 않습니다(예: 65세 이상)",
            f"'{elderly.group(0)}' states no age (e.g. 65 or older)",
        )
    numbers_said = {q.value for q in numbers}
    for c in filters:
        for value in _values(c):
            number = int(str(value)[:2]) if c["field"] == "age_group" else value
            if isinstance(number, int) and not ({number, number - 9} & numbers_said):
                yield Disagreement(
                    "",
                    f"질문에 없는 나이 조건({value})",
                    f"an age the question does not state ({value})",
                )


def _age_carried(q: Quantity, c: dict) -> bool:
    values = _values(c)
    if q.unit == DECADE:
        band = f"{q.value}대"
        if c["field"] == "age_group":
            return any(str(v).startswith(band) for v in values)
        if q.direction == UP:
            return c["op"] in ("gte", "gt") and q.value in values
        if q.direction == DOWN:
            return c["op"] in ("lte", "lt") and (q.value + 9 in values or q.value in values)
        return q.value in values or q.value + 9 in values
    if q.value not in values:
        return False
    return q.direction not in _OPS_OF or c["op"] in _OPS_OF[q.direction] or c["op"] == "between"


# -- time ----------------------------------------------------------------------------------------


def _bounds(plan: dict) -> dict[str, tuple[dt.date | None, dt.date | None]]:
    """Each date field's [first, last] day as the plan's conditions leave it."""
    out: dict[str, tuple[dt.date | None, dt.date | None]] = {}
    entities = [plan["entity"]] + [r.get("entity") for r in plan.get("related") or []]
    kinds = {
        name: spec.kind
        for entity in entities
        if entity in ENTITIES
        for name, spec in ENTITIES[entity].fields.items()
        if spec.kind in (Kind.DATE, Kind.MONTH)
    }
    for c in conditions(plan):
        kind = kinds.get(c["field"])
        if kind is None or c["op"] not in ("eq", "gte", "gt", "lte", "lt", "between"):
            continue
        low, high = out.get(c["field"], (None, None))
        values = _values(c)
        first = _day(values[0], kind, end=False)
        last = _day(values[-1], kind, end=True)
        if first is None or last is None:
            continue
        if c["op"] in ("eq", "between"):
            low, high = _max(low, first), _min(high, last)
        elif c["op"] == "gte":
            low = _max(low, first)
        elif c["op"] == "gt":
            low = _max(low, last + dt.timedelta(days=1))
        elif c["op"] == "lte":
            high = _min(high, last)
        else:
            high = _min(high, first - dt.timedelta(days=1))
        out[c["field"]] = (low, high)
    return out


def _day(value, kind: Kind, *, end: bool) -> dt.date | None:
    try:
        if kind == Kind.MONTH:
            year, month = map(int, str(value).split("-"))
            first = dt.date(year, month, 1)
            return periods._month_end(year, month) if end else first
        return dt.date.fromisoformat(str(value))
    except ValueError:
        return None


def _max(a, b):
    return b if a is None else max(a, b)


def _min(a, b):
    return b if a is None else min(a, b)


def times(text: str, plan: dict, numbers: list[Quantity], as_of: dt.date):
    english = words.english(text)
    bounds = _bounds(plan)
    named = periods.windows(text, numbers, as_of)
    if not any(w.exact for w in named):
        named += periods.relative_year(text, as_of)
    for window in named:
        fields = [f for f in bounds if not window.fields or f in window.fields]
        if not any(_window_carried(window, *bounds[f]) for f in fields):
            read_as = josa(window.shown(False), "으로/로")
            ko = f"{quoted(window.words, '을/를')} {read_as} 읽었습니다"
            yield Disagreement(window.words, ko, f"read '{window.words}' as {window.shown(True)}")
    windowed = [
        f for f, (low, high) in bounds.items()
        if (low is not None or high is not None) and not _still_ahead(f, low, high, text, as_of)
    ]  # fmt: skip
    if windowed and not periods.mentions_time(text):
        if not (periods.soon_window_allowed(text) and windowed == ["end_date"]):
            yield Disagreement(
                "",
                "질문에 없는 기간 조건",
                "a time window the question does not state",
            )
    yield from _birthdays(text, plan, english)


def _still_ahead(field: str, low, high, text: str, as_of: dt.date) -> bool:
    """'만기가 가장 임박한': maturities from the as-of date on, with no end: not a window."""
    return (
        field == "end_date"
        and low in (as_of, as_of + dt.timedelta(days=1))
        and (high is None or high.year >= 2999)
        and re.search(r"만기|만료|matur|expir", text, re.IGNORECASE) is not None
    )


def _window_carried(w: Window, low: dt.date | None, high: dt.date | None) -> bool:
    if w.direction == BEFORE:
        return high is not None and high == w.first - dt.timedelta(days=1)
    if w.direction == AFTER:
        return low in (w.first, w.last + dt.timedelta(days=1)) and (high is None or high > w.last)
    if w.direction == UNTIL:
        return high == w.last and (low is None or low < w.first)
    if w.direction == periods.TOUCH:
        return (low is None or low <= w.last) and (high is None or high >= w.first)
    if low is None or high is None:
        return False
    if w.exact:
        return low >= w.first and high <= w.last and (low, high) != (w.first, w.first)
    return low >= w.first and high <= w.last


def _birthdays(text: str, plan: dict, english: bool) -> Iterator[Disagreement]:
    said = periods.birthdays(text)
    if not said:
        return
    births = [c for c in conditions(plan) if c["field"] == "birth_date"]
    for b in said:
        key = f"{b.month:02d}-{b.day:02d}"
        if b.year is not None:  # a whole date of birth: the plan compares birth_date with it
            day = f"{b.year}-{key}"
            carried = any(day in map(str, _values(c)) for c in births)
        else:
            carried = any(key in _values(c) or _day_of(c) == key for c in births)
        if not carried:
            ko = f"{quoted(b.words, '을/를')} 생일 {b.month}월 {b.day}일로 읽었습니다"
            en = f"read '{b.words}' as a birthday on {dt.date(2024, b.month, b.day):%B} {b.day}"
            yield Disagreement(b.words, ko, en)


def _day_of(c: dict) -> str | None:
    values = _values(c)
    if c["op"] == "eq" and len(values) == 1 and len(str(values[0])) == 10:
        return str(values[0])[5:]
    return None


# -- grouping, statuses, names -------------------------------------------------------------------


_AGGREGATE_CUES = {
    "count": r"몇|수\b|수[는가를요]|건수|명수|개수|인원|count|\bmany\b|number of|얼마나 많",
    # "건수와 (미납) 금액", "count and amount": a money column beside a count is its total.
    "sum": r"(?:건수|개수|count)(?:와|과|랑|하고|\s*(?:및|and|&|,))\s*(?:\S+\s)?"
    r"(?:금액|보험료|amount|premium)|"
    r"합계|합산|합\b|총|얼마|전체 금액|누적|sum|total|how much|상위|하위|top|bottom|"
    r"많이|많은|"
    r"적게|적은|most|least|가장|제일|순위|rank|best|worst|highest|lowest|비교",
    "avg": r"평균|average|avg|mean",
    "max": r"최대|최고|가장|제일|젤|max|highest|largest|biggest|most|top|priciest|costliest|비싼",
    "min": r"최소|최저|가장|제일|젤|min|lowest|smallest|least|cheapest|싼",
}
_AGGREGATE_WORDS = {"count": ("건수·인원", "count"), "sum": ("합계", "sum"),
                    "avg": ("평균", "average"), "max": ("최댓값", "maximum"),
                    "min": ("최솟값", "minimum")}  # fmt: skip


_BOUNDS_SAID = re.compile(r"at (?:most|least)|no (?:more|less) than|not (?:more|less) than", re.I)


def aggregates(text: str, plan: dict) -> Iterator[Disagreement]:
    """An aggregate the question gives no word for ("미납 금액이 4만원 이상인 미납 건" is rows,
    not their sum). Only an answer of one figure: grouped rows carry their counts and sums as
    columns beside what was asked."""
    if plan.get("group_by"):
        return
    said = _BOUNDS_SAID.sub(" ", text)  # "at most 75k" is a bound, not a "most"
    for aggregate in plan.get("aggregates") or []:
        fn = aggregate.get("fn")
        cue = _AGGREGATE_CUES.get(fn)
        if cue and not re.search(cue, said, re.IGNORECASE):
            ko, en = _AGGREGATE_WORDS[fn]
            yield Disagreement(
                "", f"질문에 없는 집계({ko})", f"an aggregate the question does not ask ({en})"
            )


_PEOPLE_COUNTED = re.compile(r"명|분|people|customer")


def related_counts(text: str, plan: dict, numbers: list[Quantity]) -> Iterator[Disagreement]:
    """ "계약이 2건 이상인 고객", "at least 2 contracts": a count of the row's other rows."""
    counts = [
        q
        for q in numbers
        if q.unit == COUNT and q.direction == UP and not _PEOPLE_COUNTED.search(q.words)
    ]
    carried = [r.get("at_least") for r in plan.get("related") or [] if r.get("at_least")]
    for q in counts:
        if not any(n in (q.value, q.value + 1) for n in carried):
            ko = f"{quoted(q.words, '을/를')} 관련 행이 {q.value}건 이상이라는 조건으로 읽었습니다"
            en = f"read '{q.words}' as at least {q.value} related rows"
            yield Disagreement(q.words, ko, en)
    for n in carried:
        if not any(n in (q.value, q.value + 1) for q in counts):
            yield Disagreement(
                "",
                f"질문에 없는 건수 조건({n}건 이상)",
                f"a count the question does not state ({n})",
            )


def grouping(text: str, plan: dict) -> Iterator[Disagreement]:
    grouped = set(plan.get("group_by") or [])
    for word, dim in words.groupings(text):
        fields = words.DIM_FIELDS.get(dim, ())
        if not grouped & set(fields):
            ko = f"{quoted(word, '을/를')} {words.DIM_LABEL[dim][0]}별로 묶으라는 말로 읽었습니다"
            en = f"read '{word}' as one row per {words.DIM_LABEL[dim][1]}"
            yield Disagreement(word, ko, en)


_CONTRACT_STATUSES = frozenset(CONTRACT_STATUSES)


def statuses(text: str, plan: dict) -> Iterator[Disagreement]:
    said = words.statuses(text)
    in_plan = {v for c in conditions(plan) if c["field"] == "status" for v in _values(c)}
    if said.every:
        if in_plan:  # "모든 상태" with a status in the plan: one of them was not read as asked
            ko = f"{quoted(said.every, '을/를')} 모든 상태로 읽었습니다"
            en = f"read '{said.every}' as every status"
            yield Disagreement(said.every, ko, en)
        return
    for word, _entity, value in said.named:
        if value not in in_plan:
            ko = f"{quoted(word, '을/를')} 상태 {quoted(value, '으로/로')} 읽었습니다"
            en = f"read '{word}' as the status {value} ({VALUE_GLOSSES.get(value, value)})"
            yield Disagreement(word, ko, en)
    # The catalogue's convention: a premium total or ranking counts in-force contracts.
    premium = in_force_by_default(plan) and words.premium_said(text)
    conventional = {IN_FORCE_STATUS} if premium else set()
    for value in sorted(in_plan - conventional):
        if value not in said.cued:
            ko = f"질문에 없는 상태 조건({value})"
            en = f"a status the question does not state ({VALUE_GLOSSES.get(value, value)})"
            yield Disagreement("", ko, en)
    if conventional and not in_plan and not said.cued & _CONTRACT_STATUSES:
        ko = "보험료 합계·순위는 묻지 않으면 유지 계약만 셉니다"
        en = "premium totals and rankings count in-force contracts unless asked"
        yield Disagreement("", ko, en)


def names(text: str, plan: dict) -> Iterator[Disagreement]:
    carried = {
        str(v) for c in conditions(plan) if c["field"] == "customer_name" for v in _values(c)
    }
    for part in words.asked_name_parts(text):
        if part not in carried:
            yield Disagreement(
                part,
                f"이름에 {quoted(part, '이/가')} 들어가는 고객으로 읽었습니다",
                f"read as names containing '{part}'",
            )
    for c in conditions(plan):
        if c["field"] != "customer_name":
            continue
        for value in _values(c):
            value = str(value)
            written = value in text or words.english(text)  # "surnamed Park": romanised
            if not written or value in words.PEOPLE_WORDS:
                yield Disagreement(
                    value,
                    f"{quoted(value, '은/는')} 고객 이름이 아닙니다",
                    f"'{value}' is not a customer's name",
                )
            elif c["op"] == "eq" and words.contains_asked(text, value):
                yield Disagreement(
                    value,
                    f"이름에 {quoted(value, '이/가')} 들어가는 고객으로 읽었습니다",
                    f"read as names containing '{value}'",
                )
