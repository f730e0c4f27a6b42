"""The reader's condition stages: each reads the analysed question and returns a fragment of the
plan plus the tokens it used, or read as a condition it cannot apply. The shape of the answer is
read by kb.selectai.shape, a clause about other rows by kb.selectai.related.

A stage never changes the question and never reads a token an earlier stage took (`taken`), so
every word is used by one part of the plan at most; kb.selectai.parser composes the fragments
and refuses a question with a word left over that could change the answer.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field

from kb.catalogue import (
    CONTRACTS,
    CUSTOMERS,
    ENTITIES,
    EXPIRING_SOON_MONTHS,
    PAID_STATUS,
    PAID_WORDS,
    PAYMENTS,
)
from kb.josa import josa

from . import dates
from .dates import Period, add_months, month_start, months_period
from .periods import FAR_FUTURE, MONTH_NAMES, TIME_UNITS
from .question import FILTER_KINDS, THRESHOLDS, Question, span
from .recognise import SURNAMES, NumberMention
from .wording import DIM_LABELS, MEASURE_LABELS, OP_LABELS, text_condition

FIELDS: dict[str, frozenset[str]] = {name: spec.columns for name, spec in ENTITIES.items()}
IDENTITY_FIELDS: dict[str, list[str]] = {
    name: list(spec.identity) for name, spec in ENTITIES.items()
}
CUSTOMER_DETAIL_FIELDS = ["customer_id", "customer_name", "birth_date", "age", "gender", "phone",
                          "rrn", "grade", "planner_id", "planner_name", "branch_id",
                          "branch_name", "joined_on"]  # fmt: skip
# Dimensions whose natural order is the key itself (a time series, an age ladder).
ORDERED_DIMS = {"month", "age_group"}
# Words that make two bounds one range.
_RANGE_WORDS = re.compile(r"부터|까지|사이|에서|~|\b(?:between|to|from|and)\b", re.IGNORECASE)
_RANGE_FORMS = frozenset({"사이", "~", "between", "부터", "까지", "에서", "from", "to"})


@dataclass(slots=True)
class Fragment:
    """What one stage adds to the plan, and which tokens it used or could not use."""

    filters: list[dict] = field(default_factory=list)
    understood: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # keys of kb.selectai.wording.NOTES
    unexpressed: list[str] = field(default_factory=list)  # columns named by a condition no plan
    consumed: set[int] = field(default_factory=set)  # tokens the plan now answers for
    unusable: set[int] = field(default_factory=set)  # tokens read as a condition not applied
    reasons: list[str] = field(default_factory=list)  # what could not be applied, in words

    def add_filter(self, entity: str, fld: str, op: str, value, label: str, tokens) -> bool:
        if fld not in FIELDS[entity]:
            self.cannot(label, tokens)
            return False
        self.filters.append({"field": fld, "op": op, "value": value})
        self.understood.append(label)
        self.consumed.update(tokens)
        return True

    def cannot(self, reason: str, tokens) -> None:
        self.reasons.append(reason)
        self.unusable.update(tokens)


# -- entity ----------------------------------------------------------------------------------


def entity_stage(q: Question) -> tuple[str, Fragment]:
    """Which table answers the question. Most specific evidence first: a payment status means
    premium_payments, 만기 or a contract measure means contracts, "보험료" means payments unless
    it is a contract attribute, products/statuses mean contracts, anything else customers."""
    f = q.f
    fragment = Fragment()
    for kind in ("noun", "sold", "history", "measure", "list", "detail"):
        for _, m in f.kinds(kind):
            fragment.consumed.update(span(m))
    if q.monthly_amount is not None:
        fragment.consumed |= span(q.monthly_amount)
    return _entity_of(q), fragment


def _entity_of(q: Question) -> str:
    f = q.f
    nouns = set(f.values("noun"))
    measures = set(f.values("measure"))
    # "내역" means payment history unless it follows 계약 ("계약 내역") with no premium word.
    paymentish = bool(
        {"premium", "payment"} & nouns or (f.has("history") and "contract" not in nouns)
    )
    if f.contract_ids:
        return PAYMENTS if paymentish or f.has("pay_status") else CONTRACTS
    if f.has("pay_status"):
        return PAYMENTS
    if q.monthly_amount is not None:
        return CONTRACTS  # "매달 20만원 넘게 내는": the monthly premium is a contract's
    if f.has("expire") or measures & {"monthly_premium", "sum_insured"}:
        return CONTRACTS
    if paymentish or "amount" in measures:
        return CONTRACTS if _premium_of_a_contract(q, nouns, measures) else PAYMENTS
    if (
        "contract" in nouns
        or f.has("sold")
        or f.has("contract_status")
        or f.has("product")
        or f.has("category")
        or {"product", "category", "contract"} & set(q.grouped_dims)
        or q.rank_unit in ("product", "category", "contract")
    ):
        return CONTRACTS
    return CUSTOMERS


def _premium_of_a_contract(q: Question, nouns: set, measures: set) -> bool:
    """A premium used as a contract attribute: "보험료 상위 5개 계약", "평균 보험료", "보험료
    10만원 이상 계약" (with no payment word or period, which make it payments)."""
    f = q.f
    has_time = bool(
        f.kinds("time") or f.iso_periods or any(n.unit in TIME_UNITS for n in f.numbers)
    )
    payment_words = "payment" in nouns or f.has("history") or "month" in q.grouped_dims
    if payment_words or has_time:
        return False
    aggs = set(q.agg_fns) | set(f.values("extreme"))
    return (
        q.rank_unit == "contract"
        or ("contract" in nouns and bool(q.rank or q.money_numbers))
        or bool(aggs & {"avg", "min", "max"} and "amount" not in measures)
    )


def scope_stage(q: Question) -> Fragment:
    """담당 / 우리 지점 / 전체 name the asker's scope; a question can narrow it, never widen it."""
    fragment = Fragment()
    for kind in ("mine", "all", "bypass", "asof"):
        for _, m in q.f.kinds(kind):
            fragment.consumed.update(span(m))
    if q.f.has("all") or q.f.has("bypass"):
        fragment.notes.append("widening")
    for written, read_as in q.f.corrected:
        fragment.understood.append(
            f"{josa(repr(written), '을/를')} {josa(repr(read_as), '으로/로')} 읽음"
        )
    return fragment


# -- birth dates -------------------------------------------------------------------------------


def birth_stage(q: Question, entity: str) -> Fragment:
    """'1987년생', '80년대생', '1990년 이후 출생', 'born in March 1987', '생년월일이 …'."""
    f, fragment = q.f, Fragment()
    taken: set[int] = set()
    births = [n for n in f.numbers if _birth_year(q, n)]
    for partner in _range_partners(q, births):
        births.append(partner)  # "1970년부터 1979년 사이에 태어난": both years are birth years
    for number in f.numbers:
        if number.first in taken or number not in births:
            continue
        year = number.value
        if year < 100:  # "87년생": the most recent such year up to the as-of date
            century = q.as_of.year // 100 * 100
            year = century + year if century + year <= q.as_of.year else century - 100 + year
        tokens = span(number) | _birth_words_near(q, number)
        decade = number.unit in ("decade_years", "decade")
        first_day, last_day = dt.date(year, 1, 1), dt.date(year + 9 if decade else year, 12, 31)
        label = f"{year}년대" if decade else f"{year}년"
        month, day, modifier, used = _birth_month_day(q, number, number.modifier)
        tokens |= used
        if month is not None and not decade:
            first_day = last_day = dt.date(year, month, day or 1)
            if day is None:
                last_day = dates.month_end(first_day)
            label = first_day.isoformat() if day else dates.month_key(first_day)
        flt: tuple[str, str | list[str]]  # (op, ISO date or [first, last])
        if modifier == "from":
            flt, label = ("gte", first_day.isoformat()), f"출생 {label} 이후"
        elif modifier == "after":
            flt, label = ("gt", last_day.isoformat()), f"출생 {label} 이후"
        elif modifier == "before":
            flt, label = ("lt", first_day.isoformat()), f"출생 {label} 이전"
        elif first_day == last_day:
            flt, label = ("eq", first_day.isoformat()), f"생년월일 {label}"
        else:
            flt = ("between", [first_day.isoformat(), last_day.isoformat()])
            label = f"출생 {label}"
        taken |= tokens
        op, value = flt
        fragment.add_filter(entity, "birth_date", op, value, label, tokens)
    join_ranges(q, fragment, "birth_date")
    birthday = [m for v, m in f.kinds("column") if v == "birth_date"] or (
        [m for v, m in f.kinds("birth") if m.text.lower() == "born"]
    )
    for period, period_tokens in zip(f.iso_periods, f.iso_tokens, strict=True):
        born = {period_tokens[-1] + 1} if _form(q, period_tokens[-1] + 1) == "생" else set()
        if (birthday or born) and period.start == period.end:  # "생년월일이 1987-02-11인"
            day = period.start.isoformat()
            words = set(period_tokens) | born | {i for m in birthday for i in span(m)}
            taken |= words
            fragment.add_filter(entity, "birth_date", "eq", day, f"생년월일 {day}", words)
    _birthday_filter(q, fragment, entity, frozenset(taken))
    return fragment


_BIRTHDAY_TIMES = frozenset({"this_month", "last_month", "next_month", "this_week", "last_week",
                             "next_week", "today", "tomorrow", "yesterday"})  # fmt: skip
_LEAP_YEAR = 2024  # every month-day exists in it


def _birthday_filter(q: Question, fragment: Fragment, entity: str, taken: frozenset[int]) -> None:
    """A birthday without a year: "3월에 태어난", "5월생", "born in May", "생일이 12일인", "생일이
    다음 주인": the month and day of birth_date in any year."""
    f = q.f
    marks = [span(m) for v, m in f.kinds("column") if v == "birth_date"]
    marks += [span(m) for _, m in f.kinds("birth")]
    # "5월생", "2월 11일생"
    marks += [
        {n.last + 1}
        for n in f.numbers
        if _form(q, n.last + 1) == "생" and n.unit in ("month", "days")
    ]
    if not marks:
        return
    marked = set().union(*marks)

    def near(first: int, last: int) -> bool:
        return any(-4 <= min(m) - last <= 4 or -4 <= first - max(m) <= 4 for m in marks)

    numbers = [
        n for n in f.numbers
        if n.unit in ("month", "days") and n.first not in taken and near(n.first, n.last)
    ]  # fmt: skip
    times = [
        (v, m) for v, m in f.kinds("time")
        if v in _BIRTHDAY_TIMES and m.first not in taken and near(m.first, m.last)
    ]  # fmt: skip
    english_months = [
        (i, month)
        for i, month, year in q.periods(taken)._english_month_tokens()
        if year is None and near(i, i)
    ]
    if not numbers and not times and not english_months:
        return
    days: set[dt.date] = set()
    words = {i for i in marked if i not in taken}
    for i, month in english_months:  # "born in March", "born on 11 February", "on May 2"
        words.add(i)
        day = _english_day_beside(q, i, taken)
        if day is not None:
            words |= span(day)
        days |= _days_of(month, day.value if day else None)
    months = [n for n in numbers if n.unit == "month"]
    for n in numbers:
        words |= span(n)
        if n.unit == "month":
            on = next((d for d in numbers if d.unit == "days" and d.first == n.last + 1), None)
            days |= _days_of(n.value, on.value if on else None)
        elif not any(m.last + 1 == n.first for m in months):  # "생일이 12일": every 12th
            days |= {d for month in range(1, 13) for d in _days_of(month, n.value)}
    for value, m in times:
        words |= span(m)
        period = q.periods(taken).relative(value)
        assert period is not None  # every birthday time word names a period
        current = period.start
        while current <= period.end:
            days.add(current.replace(year=_LEAP_YEAR))
            current += dt.timedelta(days=1)
    _add_birthdays(fragment, entity, days, words)


def _add_birthdays(fragment: Fragment, entity: str, days: set[dt.date], words: set[int]) -> None:
    """Days of the year as one month-day condition: a range when they run on, else a list."""
    keys = sorted(d.strftime("%m-%d") for d in days)
    ordinal = sorted(d.toordinal() for d in days)
    label = "생일 " + (f"{keys[0]}~{keys[-1]}" if len(keys) > 1 else keys[0]) if keys else "생일"
    if keys and ordinal[-1] - ordinal[0] + 1 == len(ordinal):
        fragment.add_filter(entity, "birth_date", "month_day_between", [keys[0], keys[-1]],
                            label, words)  # fmt: skip
    elif keys and len(keys) <= MAX_MONTH_DAYS:
        fragment.add_filter(entity, "birth_date", "month_day_in", keys, label, words)
    else:
        fragment.unexpressed.append("birth_date")  # refused as masked where it is
        fragment.cannot("생일(월·일) 조건", words)


MAX_MONTH_DAYS = 100


def _english_day_beside(q: Question, i: int, taken: frozenset[int]) -> NumberMention | None:
    """The day written with an English month name: "11 February", "February 11", "the 11th of"."""
    for n in q.f.numbers:
        if n.unit is None and 1 <= n.value <= 31 and n.first not in taken:
            gap = [t.form for t in q.tokens[n.last + 1 : i]] if n.last < i else []
            if n.first == i + 1 or n.last + 1 == i or gap in (["of"], ["th", "of"], ["th"]):
                return n
    return None


def _days_of(month: int, day: int | None) -> set[dt.date]:
    if not 1 <= month <= 12:
        return set()
    if day is not None:
        try:
            return {dt.date(_LEAP_YEAR, month, day)}
        except ValueError:
            return set()
    first = dt.date(_LEAP_YEAR, month, 1)
    last = dates.month_end(first)
    return {first + dt.timedelta(days=i) for i in range((last - first).days + 1)}


def _form(q: Question, i: int) -> str:
    return q.tokens[i].form if 0 <= i < len(q.tokens) else ""


def _range_partners(q: Question, births: list[NumberMention]) -> list[NumberMention]:
    """Years joined to a birth year as the other end of a range."""
    years = [n for n in q.f.numbers if n.unit in ("year", "decade_years") and n not in births]
    out = []
    for year in years:
        for birth in births:
            low, high = sorted((year, birth), key=lambda n: n.first)
            between = range(low.last + 1, high.first)
            joined = all(q.tokens[i].form in _RANGE_FORMS for i in between) and len(between) <= 1
            if joined and _RANGE_WORDS.search(q.text):
                out.append(year)
                break
    return out


def _birth_words_near(q: Question, number: NumberMention) -> set[int]:
    """The birth words that make `number` a birth year (생, 출생, born, 생년월일)."""
    tokens, out = q.tokens, set()
    if number.last + 1 < len(tokens) and tokens[number.last + 1].form == "생":
        out.add(number.last + 1)
    births = [m for _, m in q.f.kinds("birth")]
    births += [m for v, m in q.f.kinds("column") if v == "birth_date"]
    for m in births:
        if -3 <= m.first - number.last <= 2 or 0 < number.first - m.last <= 3:
            out |= span(m)
    return out


def _birth_year(q: Question, number: NumberMention) -> bool:
    if number.unit in ("year", "years", "decade_years"):
        return q.birth_context(number)
    if number.unit == "decade" and number.counter == "s":
        return q.birth_context(number)  # "born in the 90s": the 1990s, not people in their 90s
    # "born in March 1987": a bare four-digit year next to a birth word
    return number.unit is None and 1900 <= number.value <= 2999 and q.birth_context(number)


def _birth_month_day(q: Question, year: NumberMention, modifier):
    """The month (and day) written with a birth year: "1990년 1월 1일 이후", "March 1987"."""
    f, tokens = q.f, q.tokens
    month = day = None
    used: set[int] = set()
    following = next((n for n in f.numbers if n.first == year.last + 1 and n.unit == "month"), None)
    if following is not None:
        month = following.value
        used |= span(following)
        modifier = following.modifier or modifier
        on_day = next(
            (n for n in f.numbers if n.first == following.last + 1 and n.unit == "days"), None
        )
        if on_day is not None and 1 <= on_day.value <= 31:
            day = on_day.value
            used |= span(on_day)
            modifier = on_day.modifier or modifier
    elif year.first > 0 and tokens[year.first - 1].form in MONTH_NAMES:
        month = MONTH_NAMES[tokens[year.first - 1].form]
        used.add(year.first - 1)  # not a period any more
    if month is not None and day is not None:
        try:
            dt.date(year.value, month, day)
        except ValueError:
            day = None
    return month, day, modifier, used


def join_ranges(q: Question, fragment: Fragment, fld: str) -> None:
    """Two bounds on one field written as a range ("5만원에서 10만원 사이", "1975년생부터
    1980년생까지") become one between condition."""
    conditions = [x for x in fragment.filters if x["field"] == fld]
    if len(conditions) != 2 or not _RANGE_WORDS.search(q.text):
        return
    fragment.consumed.update(i for i, t in enumerate(q.tokens) if t.form in _RANGE_FORMS)
    bounds: list[str] = []  # ISO dates
    for x in conditions:
        value = x["value"]
        bounds += value if x["op"] == "between" else [value]
    low, high = min(bounds), max(bounds)
    fragment.filters = [x for x in fragment.filters if x["field"] != fld]
    fragment.filters.append({"field": fld, "op": "between", "value": [low, high]})


# -- conditions on a personal column's text ------------------------------------------------------


def personal_text_stage(q: Question, entity: str, taken: frozenset[int]) -> Fragment:
    """A value right after a personal column is a condition on it: '주민번호가 87로 시작하는',
    '전화번호 끝자리가 2842인', 'phone number 010-8108-7615', '이름이 신으로 시작하는'.

    Such a condition is never dropped: where the asker sees the column masked, answering
    refuses it (kb.answering), so a hidden value cannot be narrowed down by asking.
    """
    f, tokens, text = q.f, q.tokens, q.text
    fragment = Fragment()
    operator_at = {i: (op, o) for op, o in f.kinds("text_op") for i in span(o)}
    plain_numbers = {
        n.first: n
        for n in f.numbers
        if n.unit is None and n.first == n.last and n.first not in taken
    }
    for surname, words in _surnames(q, taken):
        label = text_condition(
            ENTITIES[CUSTOMERS].fields["customer_name"].label, surname, "startswith"
        )
        fragment.add_filter(entity, "customer_name", "startswith", surname, label, words)
    for column, m in f.kinds("column"):
        if column not in ("phone", "rrn", "customer_name"):
            continue
        op, at, words = None, None, set(span(m))
        for i in range(m.last + 1, min(m.last + 6, len(tokens))):
            if i in operator_at:
                op = op or operator_at[i][0]
                words |= span(operator_at[i][1])
            elif at is None and _column_value(q, tokens[i], column, i, plain_numbers, taken):
                at = i
            elif i in f.recognised:
                break  # the next phrase ("목록", "고객") ends the condition
        if at is None:
            if op is not None:  # "주민번호 뒷자리로 찾아줘": an operator with no value
                fragment.unexpressed.append(column)
            continue
        op = op or "eq"
        value = text[tokens[at].start : tokens[at].end]
        label = text_condition(ENTITIES[CUSTOMERS].fields[column].label, value, op)
        fragment.add_filter(entity, column, op, value, label, words | {at})
    return fragment


_SURNAME_KO = re.compile(
    r"(?<![가-힣])([가-힣])씨(?:\s*성)?"  # 김씨 고객, 이씨 성을 가진
    r"|성(?:씨)?(?:이|은|가)\s*([가-힣])(?:씨|가|인|이)"  # 성이 박인, 성은 김씨인
)
_SURNAME_EN = re.compile(
    r"\b(?:surnamed|surname|last name|family name)\s+(?:is\s+|of\s+)?([A-Za-z]+)", re.IGNORECASE
)
# Revised (and common) romanisations of frequent surnames.
_ROMAN_SURNAMES = {
    "kim": "김", "gim": "김", "lee": "이", "yi": "이", "rhee": "이", "park": "박", "pak": "박",
    "bak": "박", "choi": "최", "choe": "최", "jung": "정", "jeong": "정", "chung": "정",
    "kang": "강", "gang": "강", "cho": "조", "jo": "조", "yoon": "윤", "yun": "윤", "jang": "장",
    "chang": "장", "lim": "임", "im": "임", "han": "한", "oh": "오", "o": "오", "seo": "서",
    "suh": "서", "shin": "신", "sin": "신", "kwon": "권", "gwon": "권", "hwang": "황", "ahn": "안",
    "an": "안", "song": "송", "hong": "홍", "yoo": "유", "yu": "유", "ryu": "류", "jeon": "전",
    "ko": "고", "go": "고", "moon": "문", "mun": "문", "baek": "백", "heo": "허", "nam": "남",
    "noh": "노", "no": "노", "ha": "하", "kwak": "곽", "sung": "성", "seong": "성", "cha": "차",
    "ju": "주", "joo": "주", "woo": "우", "u": "우", "min": "민", "jin": "진", "ji": "지",
    "um": "엄", "eom": "엄",
}  # fmt: skip


def _surnames(q: Question, taken: frozenset[int]):
    """ "김씨 고객", "성이 박인", "customers surnamed Park": a condition on the name's first
    letter (refused where the asker sees names masked)."""
    found = []
    for m in _SURNAME_KO.finditer(q.text):
        surname = m.group(1) or m.group(2)
        if surname in SURNAMES:
            found.append((surname, m.start(), m.end()))
    for m in _SURNAME_EN.finditer(q.text):
        surname = _ROMAN_SURNAMES.get(m.group(1).lower())
        if surname:
            found.append((surname, m.start(), m.end()))
    for surname, start, end in found:
        words = {i for i, t in enumerate(q.tokens) if t.start < end and t.end > start}
        if words and not words & taken:
            yield surname, words


def _column_value(q: Question, token, column: str, i: int, plain_numbers: dict, taken) -> bool:
    if i in taken:
        return False
    if token.tag == "W_SERIAL" or i in plain_numbers:
        return True
    if token.tag == "SL":
        return any(ch.isdigit() for ch in token.form)
    # A name (or its first letters) for the name column: "이름이 신으로 시작하는".
    return column == "customer_name" and token.tag in ("NNG", "NNP") and i not in q.f.recognised


# -- periods ---------------------------------------------------------------------------------


@dataclass
class PeriodPart:
    fragment: Fragment
    period: Period | None  # the period the question names, applied or not
    applied: Period | None  # the period a filter was built from


def period_stage(q: Question, entity: str, taken: frozenset[int]) -> PeriodPart:
    fragment = Fragment()
    for _, m in q.f.kinds("new"):
        fragment.consumed.update(span(m))
    resolver = q.periods(taken)
    expire_mode = q.expire_mode(taken) if entity == CONTRACTS else None
    period = _expiring_period(q, resolver.resolve(future=expire_mode == "expiring"), expire_mode)
    if period is None:
        return PeriodPart(fragment, None, None)
    words = resolver.consumed() - taken
    if entity == PAYMENTS:
        return _payment_period(q, fragment, period, words, resolver)
    if entity == CONTRACTS:
        statuses = set(q.f.values("contract_status"))
        if expire_mode is None and q.customer_joined:
            fld, label = "joined_on", "고객 가입일"  # "2024년에 가입한 고객의 계약"
            period = period.clipped(not_after=q.as_of)
        elif expire_mode is not None and not (expire_mode == "status" and q.f.has("new")):
            fld, label = "end_date", "만기일"  # "2024년에 계약한 만기 계약": the start, below
        elif statuses & {"해지", "실효"} and not q.f.has("new"):
            # There is no termination/lapse date column; do not guess with start_date.
            fragment.cannot(f"기간 {dates.describe(period)}", words)
            return PeriodPart(fragment, period, None)
        else:
            # Not cut at the as-of date: contracts can be signed to start later this year.
            fld, label = "start_date", "계약 시작일"
    else:
        fld, label = "joined_on", "가입일"
        period = period.clipped(not_after=q.as_of)
    fragment.filters.append(_between(fld, period))
    fragment.understood.append(f"{label} {dates.describe(period)}")
    fragment.consumed |= words
    return PeriodPart(fragment, period, period)


def _expiring_period(q: Question, period: Period | None, expire_mode: str | None):
    """The period of maturing contracts: the one named, from the as-of date on ("올해 만기
    예정"); none named, the catalogue's next months ("만기 예정"), or everything still ahead
    for the nearest ones ("만기가 가장 임박한")."""
    if expire_mode != "expiring":
        return period
    if period is None and (q.rank or q.f.has("most")):
        return Period(q.as_of + dt.timedelta(days=1), FAR_FUTURE, "만기 전", whole_months=False)
    if period is None:
        start = add_months(month_start(q.as_of), 1)
        last = add_months(start, EXPIRING_SOON_MONTHS - 1)
        return months_period(start, last, f"향후 {EXPIRING_SOON_MONTHS}개월")
    if period.start < q.as_of < period.end:
        return Period(q.as_of, period.end, period.label, whole_months=False)
    return period


def _payment_period(q: Question, fragment: Fragment, period: Period, words, resolver):
    """A period of payments: due months ("3월 미납"), due days, or the day the money came in
    ("3월 1일부터 3월 31일까지 납입한")."""
    period = period.clipped(not_after=q.as_of)
    days_written = any(n.unit == "days" for n in resolver.numbers()) or any(
        p.start == p.end for p in q.f.iso_periods
    )
    if days_written and "납입" in q.f.values("pay_status"):
        fragment.filters.append(_between("paid_date", period))
        fragment.understood.append(f"납부일 {dates.describe(period)}")
    elif period.whole_months:
        first, last = period.months()
        if first == last:
            fragment.filters.append({"field": "due_month", "op": "eq", "value": first})
        else:
            fragment.filters.append({"field": "due_month", "op": "between", "value": [first, last]})
        fragment.understood.append(f"납입월 {dates.describe(period)}")
    else:
        fragment.filters.append(_between("due_date", period))
        fragment.understood.append(f"납입월 {dates.describe(period)}")
    fragment.consumed |= words
    return PeriodPart(fragment, period, period)


def _between(fld: str, period: Period) -> dict:
    return {
        "field": fld,
        "op": "between",
        "value": [period.start.isoformat(), period.end.isoformat()],
    }


# -- values from the vocabulary: ids, names, products, branches, grades, statuses, ages ----------


def _matches_of(q: Question, kind: str, values) -> set[int]:
    return {i for v, m in q.f.kinds(kind) if v in values for i in span(m)}


def _eq_or_in(q, fragment: Fragment, entity, fld, values, label, tokens, kind=None) -> None:
    """One condition on `fld`; excluded values ("자동차보험 제외") become ne/not_in."""
    if not values:
        return
    excluded, negation_words = _excluded_values(q, fld, values, kind)
    kept = [v for v in values if v not in excluded]
    if len(kept) == 1:
        fragment.add_filter(entity, fld, "eq", kept[0], label, tokens)
    elif kept:
        fragment.add_filter(entity, fld, "in", list(kept), label, tokens)
    if excluded:
        op, value = ("ne", excluded[0]) if len(excluded) == 1 else ("not_in", excluded)
        fragment.add_filter(entity, fld, op, value, f"{label} 제외", tokens | negation_words)


def _excluded_values(q: Question, fld: str, values: list, kind: str | None):
    kind = kind or FILTER_KINDS.get(fld)
    if kind is None:
        return [], set()
    by_target = q.negations.targets
    expiry = [m for _, m in q.f.kinds("expire")] if fld == "status" else []
    excluded, words = [], set()
    for value in values:
        spans = [(m.first, m.last) for v, m in q.f.kinds(kind) if v == value]
        if value == "만기":
            spans += [(m.first, m.last) for m in expiry]
        hit = [s for s in spans if s in by_target]
        if hit:
            excluded.append(value)
            for s in hit:
                words |= by_target.get(s, set())
    return excluded, words


_NAME_CONTAINS = re.compile(
    r"(?:이름|성함)\s?(?:에|이|에서)?\s?['\"‘’“”]?([가-힣]{1,3})['\"‘’“”]?\s?"
    r"(?:자|글자|라는 글자)?\s?(?:가|이)?\s?(?:들어|포함|있는)"
    r"|(?:with|containing)\s+['\"]?([가-힣]{1,3})['\"]?\s+in\s+(?:their|the)\s+names?",
    re.IGNORECASE,
)


def _name_contains(q: Question, entity: str, fragment: Fragment, taken) -> set[str]:
    """ "이름에 '민' 들어가는", "with 민 in their name": part of a customer's name (unless the
    personal-column stage read it already)."""
    found = set()
    for m in _NAME_CONTAINS.finditer(q.text):
        part = m.group(1) or m.group(2)
        tokens = {i for i, t in enumerate(q.tokens) if t.start < m.end() and t.end > m.start()}
        if tokens & taken:
            found.add(part)
            continue
        fragment.add_filter(entity, "customer_name", "contains", part, f"고객명에 '{part}' 포함",
                            tokens)  # fmt: skip
        found.add(part)
    return found


def identity_stage(q: Question, entity: str, taken: frozenset[int]) -> Fragment:
    f, fragment = q.f, Fragment()
    contained = _name_contains(q, entity, fragment, taken)
    ids = f.id_tokens
    _eq_or_in(q, fragment, entity, "customer_id", f.customer_ids,
              "고객번호 " + ", ".join(f.customer_ids), ids)  # fmt: skip
    _eq_or_in(q, fragment, entity, "contract_id", f.contract_ids,
              "계약번호 " + ", ".join(f.contract_ids), ids)  # fmt: skip
    names = [
        n for n in f.customer_names
        if not taken.intersection(f.name_tokens[n]) and n not in contained
        and not fragment.consumed.intersection(f.name_tokens[n])
    ]  # fmt: skip
    name_tokens = {i for n in names for i in f.name_tokens[n]}
    if names and not f.customer_ids:
        _eq_or_in(q, fragment, entity, "customer_name", names,
                  "고객명 " + ", ".join(names), name_tokens)  # fmt: skip
    elif names:
        fragment.consumed |= name_tokens  # a name written with the id it belongs to
    return fragment


def values_stage(q: Question, entity: str) -> Fragment:
    """Products, categories, branches, planners, grades and gender from the vocabulary."""
    f, vocab, fragment = q.f, q.vocabulary, Fragment()
    products = [c for c in f.values("product") if c in vocab.products]
    if products:
        _eq_or_in(q, fragment, entity, "product_code", products,
                  "상품 " + ", ".join(vocab.products[c].name for c in products),
                  _matches_of(q, "product", products))  # fmt: skip
    categories = [c for c in f.values("category") if c in vocab.categories]
    # "실손" (a 건강 product) plus "건강" says nothing new; keep the narrower product filter.
    product_categories = {vocab.products[c].category for c in products}
    redundant = [c for c in categories if c in product_categories]
    fragment.consumed |= _matches_of(q, "category", redundant)
    categories = [c for c in categories if c not in product_categories]
    if categories:
        _eq_or_in(q, fragment, entity, "category", categories, "카테고리 " + ", ".join(categories),
                  _matches_of(q, "category", categories))  # fmt: skip
    branches = [b for b in f.values("branch") if b in vocab.branches]
    if branches:
        _eq_or_in(q, fragment, entity, "branch_id", branches,
                  "지점 " + ", ".join(vocab.branches[b] for b in branches),
                  _matches_of(q, "branch", branches))  # fmt: skip
    if f.has("region"):
        _region_filter(q, fragment, entity, branches)
    planners = [p for p in f.values("planner") if p in vocab.planners]
    if planners:
        _eq_or_in(q, fragment, entity, "planner_id", planners,
                  "설계사 " + ", ".join(vocab.planners[p] for p in planners),
                  _matches_of(q, "planner", planners))  # fmt: skip
    grades = [g for g in f.values("grade") if g in vocab.grades]
    if grades:
        _eq_or_in(q, fragment, entity, "grade", grades, "등급 " + ", ".join(grades),
                  _matches_of(q, "grade", grades))  # fmt: skip
    genders = f.values("gender")
    gender_words = _matches_of(q, "gender", genders)
    if len(genders) == 1 and "gender" not in q.grouped_dims:
        label = "성별 " + ("여성" if genders[0] == "F" else "남성")
        _eq_or_in(q, fragment, entity, "gender", genders, label, gender_words)
    elif len(genders) > 1:  # "남녀 모두": both genders, no condition
        fragment.consumed |= gender_words
    return fragment


def _region_filter(q: Question, fragment: Fragment, entity: str, branches: list[str]) -> None:
    """ "서울 지역", "in Busan": the branches in that city ("서울 말고": the others)."""
    vocab = q.vocabulary
    kept: list[str] = []
    excluded: list[str] = []
    words: set[int] = set()
    negation_words: set[int] = set()
    for region, m in q.f.kinds("region"):
        if region not in vocab.regions:
            continue
        words |= span(m)
        if (m.first, m.last) in q.negations.targets:
            excluded += vocab.regions[region]
            negation_words |= q.negations.targets[(m.first, m.last)]
        else:
            kept += vocab.regions[region]
    if branches and kept:  # "서울 강남지점": the branch already says it
        fragment.consumed |= words
        return
    label = "지역 " + ", ".join(dict.fromkeys(r for r, _ in q.f.kinds("region")))
    kept, excluded = list(dict.fromkeys(kept)), list(dict.fromkeys(excluded))
    if len(kept) == 1:
        fragment.add_filter(entity, "branch_id", "eq", kept[0], label, words)
    elif kept:
        fragment.add_filter(entity, "branch_id", "in", kept, label, words)
    if excluded:
        op, value = ("ne", excluded[0]) if len(excluded) == 1 else ("not_in", excluded)
        fragment.add_filter(entity, "branch_id", op, value, f"{label} 제외", words | negation_words)


def other_stage(q: Question, entity: str) -> Fragment:
    """ "다른 설계사 고객", "other branches": everyone but the asker. A question narrows the
    asker's scope and never widens it, so for most askers this leaves nothing."""
    fragment = Fragment()
    dims = [(v, m) for v, m in q.f.kinds("dim") if v in ("planner", "branch")]
    negations = [m for _, m in q.f.kinds("negate")]
    for _, word in q.f.kinds("other"):
        target = next(((v, m) for v, m in dims if 0 < m.first - word.last <= 2), None)
        if target is None and any(0 < word.first - m.last <= 2 for m in negations):
            fragment.consumed |= span(word)  # "건강보험 말고 다른 계약": the rest
            continue
        if target is None:
            fragment.cannot(word.text, span(word))
            continue
        dim, m = target
        own = q.asker_id if dim == "planner" else q.asker_branch
        fld = "planner_id" if dim == "planner" else "branch_id"
        if own is None or (dim == "planner" and q.role != "planner"):
            fragment.cannot(f"다른 {DIM_LABELS[dim]}", span(word) | span(m))
            continue
        fragment.add_filter(entity, fld, "ne", own, f"다른 {DIM_LABELS[dim]}", span(word) | span(m))
    return fragment


def status_stage(q: Question, entity: str, before_period: frozenset[int]) -> Fragment:
    """Contract and payment statuses, and 만기 as a status ("만기된 계약"); `before_period` is
    what was taken before the period stage, so 만기 reads the period the question names."""
    f, vocab, fragment = q.f, q.vocabulary, Fragment()
    contract_words = {i for _, m in f.kinds("contract_status") for i in span(m)}
    pay_words = {i for _, m in f.kinds("pay_status") for i in span(m)}
    expire_words = {i for _, m in f.kinds("expire") for i in span(m)}
    if entity == PAYMENTS:
        statuses = [s for s in f.values("pay_status") if s in vocab.payment_statuses]
        if not statuses:
            statuses, received = _money_received(q)  # "들어온 보험료", "납입 총액": paid rows
            pay_words |= received
            if received:
                fragment.notes.append("paid")
        if len(statuses) > 1:
            # "납입 금액이 10만원 이상인 미납 내역": 납입 금액 names the amount, not a status.
            amount_words = [
                v for v, m in f.kinds("pay_status") if ("measure", "amount") in m.payloads
            ]
            statuses = [s for s in statuses if s not in amount_words] or statuses
        _eq_or_in(q, fragment, entity, "status", statuses, "납입상태 " + ", ".join(statuses),
                  pay_words, kind="pay_status")  # fmt: skip
        if f.values("contract_status"):
            fragment.cannot("계약상태 " + ", ".join(f.values("contract_status")), contract_words)
        if expire_words:
            fragment.cannot("만기", expire_words)
    elif entity == CONTRACTS:
        statuses = [s for s in f.values("contract_status") if s in vocab.contract_statuses]
        mode = q.expire_mode(before_period)
        if mode == "status" and "만기" in vocab.contract_statuses:
            statuses.append("만기")
        if mode == "expiring" and q.expiring_is_future(before_period):
            statuses = statuses or (["유지"] if "유지" in vocab.contract_statuses else [])
        statuses = list(dict.fromkeys(statuses))
        _eq_or_in(q, fragment, entity, "status", statuses, "계약상태 " + ", ".join(statuses),
                  contract_words | (expire_words if mode == "status" else set()),
                  kind="contract_status")  # fmt: skip
        if mode in ("expiring", "end_date"):
            fragment.consumed |= expire_words  # the period stage reads the end date
        if pay_words:
            fragment.cannot("납입상태 " + ", ".join(f.values("pay_status")), pay_words)
    elif contract_words or pay_words or expire_words:
        fragment.cannot(
            "상태 조건(고객 조회에는 상태가 없습니다)", contract_words | pay_words | expire_words
        )
    return fragment


_PAID_WORDS = re.compile("|".join(PAID_WORDS), re.IGNORECASE)
_NOT_BEFORE = re.compile(r"(?:안|못|아직\s?안|not|n't|never)\s?$", re.IGNORECASE)


def _money_received(q: Question) -> tuple[list[str], set[int]]:
    """The catalogue's convention: money received ("들어온", "받은", "납입 총액", "collected")
    is the paid rows; "안 들어온" the unpaid ones. The status and the words that say it."""
    m = _PAID_WORDS.search(q.text)
    if m is None:
        return [], set()
    status = "미납" if _NOT_BEFORE.search(q.text[: m.start()]) else PAID_STATUS
    words = {i for i, t in enumerate(q.tokens) if t.start < m.end() and t.end > m.start()}
    if status == "미납":
        words |= {i for i, t in enumerate(q.tokens) if t.form in ("안", "못", "not", "아직")}
    return [status], words


def age_stage(q: Question, entity: str, taken: frozenset[int]) -> Fragment:
    """'30대' -> age_group, '60대 이상' -> the "60대 이상" band, '50세 이상' -> age."""
    fragment = Fragment()
    ranked = q.rank.consumed if q.rank else frozenset()
    for number in q.f.numbers:
        if number.first in taken or number.first in ranked:  # "the 3 youngest": a count
            continue
        words = span(number)
        if number.unit == "decade":
            decade, modifier = number.value, number.modifier
            if modifier in ("gte", "gt") and decade == 60:
                fragment.add_filter(entity, "age_group", "eq", "60대 이상", "60대 이상", words)
            elif modifier in ("gte", "gt"):
                fragment.add_filter(entity, "age", "gte", decade, f"{decade}대 이상", words)
            elif modifier in ("lte", "lt"):
                fragment.add_filter(entity, "age", "lte", decade + 9, f"{decade}대 이하", words)
            elif decade < 60:
                fragment.add_filter(entity, "age_group", "eq", f"{decade}대", f"{decade}대", words)
            else:
                # Decades from 60 up share one band in the data, so filter on age itself.
                fragment.add_filter(entity, "age", "between", [decade, decade + 9],
                                    f"{decade}대", words)  # fmt: skip
        elif number.unit == "age":
            op = _BOUND_OF.get(number.modifier or "", "eq")
            op, words = _age_comparison(q, number, op, words)
            fragment.add_filter(entity, "age", op, number.value, f"나이 {number.value}세", words)
        elif number.unit is None and number.value < 130 and _age_context(q, number):
            bound = _BOUND_OF.get(number.modifier or "", "eq")
            op, words = _age_comparison(q, number, bound, words)
            fragment.add_filter(entity, "age", op, number.value, f"나이 {number.value}세", words)
    join_ranges(q, fragment, "age")
    return fragment


def _age_context(q: Question, number: NumberMention) -> bool:
    """A bare number is an age next to an age word or an age comparison ("older than 60",
    "aged 40", "over 50" in a question about people and no money)."""
    near = [
        m
        for _, m in q.f.kinds("measure")
        if ("measure", "age") in m.payloads and not any(k == "rank" for k, _ in m.payloads)
    ]
    if any(0 <= number.first - m.last <= 2 or 0 <= m.first - number.last <= 2 for m in near):
        return True
    customers_before = [
        m for v, m in q.f.kinds("noun") if v == "customer" and 0 < number.first - m.last <= 3
    ]
    english_cmp_beside = [
        m for _, m in q.f.kinds("cmp")
        if m.text.isascii() and (0 < number.first - m.last <= 1 or 0 < m.first - number.last <= 1)
    ]  # fmt: skip
    if customers_before and english_cmp_beside and number not in q.money_numbers:
        return True  # "… for customers 50 and up", "belong to customers over 60"
    if number in q.money_numbers or q.f.values("measure"):
        return False
    english_cmp = [m for _, m in q.f.kinds("cmp") if m.text.isascii()]
    people = q.f.has("noun", "customer") and not q.f.has("noun", "contract")
    # "over 60", "60 and up", "60 or older"
    return people and any(
        0 < number.first - m.last <= 1 or 0 < m.first - number.last <= 1 for m in english_cmp
    )


def _age_comparison(q: Question, number: NumberMention, op: str, words: set[int]):
    """The comparison written with an age: before it ("older than 60") or after ("60 or older")."""
    for value, m in q.f.kinds("cmp"):
        if 0 < number.first - m.last <= 1 or 0 < m.first - number.last <= 1:
            return (value if op == "eq" else op), words | span(m)
    return op, words


# -- amounts ---------------------------------------------------------------------------------


def amount_stage(q: Question, entity: str, taken: frozenset[int]) -> Fragment:
    f, fragment = q.f, Fragment()
    english_cmp = {m.last + 1: (v, m) for v, m in f.kinds("cmp")}
    cmp_after = {m.first: (v, m) for v, m in f.kinds("cmp")}
    measures = f.kinds("measure")
    for number in q.money_numbers:
        if number.first in taken:
            continue
        words = span(number)
        op = _BOUND_OF.get(number.modifier or "")
        for table, key in ((english_cmp, number.first), (cmp_after, number.last + 1)):
            if op is None and key in table:
                op, m = table[key]
                words |= span(m)
        band = _band_mark(q, number)
        if band is not None and op is None:
            op = "band"
            words.add(band)
        op = op or "gte"
        if entity == CONTRACTS:
            # The measure named last before the amount ("가입금액 3000만원 넘고 월보험료 …").
            before = [v for v, m in measures if m.last < number.first and v != "amount"]
            named = before[-1] if before else next((v for v, _ in measures), None)
            fld = "sum_insured" if named == "sum_insured" else "monthly_premium"
        elif entity == PAYMENTS:
            fld = "amount"
        else:
            fragment.cannot(f"금액 조건 {number.value:,}원", words)
            continue
        if op == "band":  # "6만원대": from 60,000 up to, not including, 70,000
            step = _leading_place(number.value)
            label = f"{MEASURE_LABELS.get(fld, fld)} {number.value:,}원대"
            if fragment.add_filter(entity, fld, "gte", number.value, label, words):
                fragment.filters.append({"field": fld, "op": "lt", "value": number.value + step})
            continue
        label = f"{MEASURE_LABELS.get(fld, fld)} {number.value:,}원 {OP_LABELS[op]}"
        fragment.add_filter(entity, fld, op, number.value, label, words)
    for fld in ("monthly_premium", "sum_insured", "amount"):
        join_ranges(q, fragment, fld)
    return fragment


# How a number's modifier bounds an amount or an age: "이내" and "까지" up to it, "부터" from it,
# "딱" exactly it.
_BOUND_OF = {**{op: op for op in THRESHOLDS}, "eq": "eq", "within": "lte", "until": "lte",
             "from": "gte"}  # fmt: skip


def _band_mark(q: Question, number: NumberMention) -> int | None:
    """The 대 of "6만원대", "10만 원대"."""
    following = number.last + 1
    if following < len(q.tokens) and q.tokens[following].form == "대":
        return following
    return None


def _leading_place(value: int) -> int:
    """6만 -> 1만, 10만 -> 10만, 150,000 -> 10,000: the place of the last digit that is not 0."""
    place = 1
    while value and value % (place * 10) == 0:
        place *= 10
    return place
