"""Which period a prompt means ("지난달", "최근 3개월", "2026년 5월", "3개월 이내"), as dates."""

from __future__ import annotations

import datetime as dt

from . import dates
from .dates import Period, add_months, month_start, months_period
from .lexicon import Token
from .numbers import parse_digits
from .recognise import Features, NumberMention

MONTH_NAMES = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}  # fmt: skip
_MONTH_ABBREVIATIONS = {name[:3]: i for name, i in MONTH_NAMES.items() if name != "may"}
TIME_UNITS = frozenset({"months", "years", "weeks", "days", "month", "year", "quarter", "half"})
_RELATIVE_YEARS = {"this_year": 0, "last_year": -1, "year_before_last": -2, "next_year": 1}


EARLIEST = dt.date(1900, 1, 1)


def year_period(number: NumberMention, as_of: dt.date) -> Period:
    """A calendar year, or an open range from or before it: "2023년", "2023년 이후", "before 2021".

    Korean 이후/부터 and English "since" include the year; English "after" starts the next year;
    이전 and "before" end before the year.
    """
    year = number.value
    # Open-ended: "2030년 이후 만기" reaches past the as-of date, where end dates lie.
    if number.modifier == "from":
        return Period(dt.date(year, 1, 1), FAR_FUTURE, f"{year}년 이후", whole_months=False)
    if number.modifier == "after":
        return Period(dt.date(year + 1, 1, 1), FAR_FUTURE, f"{year}년 이후", whole_months=False)
    if number.modifier == "before":
        return Period(EARLIEST, dt.date(year - 1, 12, 31), f"{year}년 이전")
    if number.modifier == "until":
        return Period(EARLIEST, dt.date(year, 12, 31), f"{year}년까지", whole_months=False)
    return months_period(dt.date(year, 1, 1), dt.date(year, 12, 1), f"{year}년")


# Words joining two bounds into one range.
RANGE_FORMS = frozenset({"부터", "까지", "사이", "에서", "~", "between", "and", "to", "from",
                         "through", "until"})  # fmt: skip
# A word right after a period that opens it up or says it is the period itself: "다음 달 이후",
# "올해 안에", "연말까지".
_TIME_EDGES = {"이후": "after", "부터": "from", "since": "from", "onwards": "from",
               "이전": "before", "before": "before", "까지": "until", "until": "until",
               "안": "within", "내": "within", "중": "within", "동안": "within"}  # fmt: skip
FAR_FUTURE = dt.date(2999, 12, 31)


def _open_ended(period: Period | None, edge: str | None, as_of: dt.date, future: bool):
    """ "다음 달 이후" is after next month; "다음 달부터" from it; "작년 이전" before last year;
    "연말까지" from now (or the beginning) to the end of the year."""
    if period is None or edge in (None, "within"):
        return period
    if edge == "after":
        return Period(period.end + dt.timedelta(days=1), FAR_FUTURE, f"{period.label} 이후",
                      whole_months=False)  # fmt: skip
    if edge == "from":
        return Period(period.start, FAR_FUTURE, f"{period.label}부터", whole_months=False)
    if edge == "before":
        return Period(EARLIEST, period.start - dt.timedelta(days=1), f"{period.label} 이전",
                      whole_months=False)  # fmt: skip
    start = as_of if future else EARLIEST
    return Period(start, period.end, f"{period.label}까지", whole_months=False)


# A month's modifier (kb.selectai.recognise) or the English word before it, as an edge.
_MONTH_EDGES = {"from": "from", "after": "after", "before": "before"}
_ENGLISH_MONTH_EDGES = {"since": "from", "from": "from", "after": "after", "before": "before"}


def _month_of(word: str) -> int | None:
    return MONTH_NAMES.get(word) or _MONTH_ABBREVIATIONS.get(word)


class PeriodResolver:
    """Resolves the period words and numbers of one prompt against the as-of date, leaving out
    the tokens another part of the question has already used (`taken`: "1987년생" is no period)."""

    def __init__(
        self,
        features: Features,
        tokens: list[Token],
        as_of: dt.date,
        taken: frozenset[int] = frozenset(),
    ):
        self.features = features
        self.tokens = tokens
        self.as_of = as_of
        self.taken = taken
        self.free_numbers = [n for n in features.numbers if n.first not in taken]
        self.time_words = [(v, m) for v, m in features.kinds("time") if m.first not in taken]

    def numbers(self) -> list[NumberMention]:
        """Numbers that measure time: "3개월", "5월", "2026년", "2주", "1분기"."""
        return [n for n in self.free_numbers if n.unit in TIME_UNITS]

    def consumed(self) -> set[int]:
        """The tokens the resolved period is read from: its dates, time numbers and words."""
        f = self.features
        used: set[int] = set()
        for period_tokens in f.iso_tokens:
            if not self.taken.intersection(period_tokens):
                used.update(period_tokens)
        for number in self.numbers():
            used.update(range(number.first, number.last + 1))
        for _, m in self.time_words + f.kinds("recent") + f.kinds("future"):
            used.update(range(m.first, m.last + 1))
        for i, _, year_at in self._english_month_tokens(with_year_token=True):
            used.add(i)
            if year_at is not None:
                used.add(year_at)
            if i > 0 and self.tokens[i - 1].form.lower() in _ENGLISH_MONTH_EDGES:
                used.add(i - 1)  # "since March"
        if len(self.numbers()) + len(self._english_month_tokens()) > 1:
            # "2020년부터 2022년까지", "between January and March": the words joining two bounds
            used.update(i for i, t in enumerate(self.tokens) if t.form in RANGE_FORMS)
        for _, m in self.time_words:
            following = m.last + 1
            if following < len(self.tokens) and self.tokens[following].form in _TIME_EDGES:
                used.add(following)
        return used

    def resolve(self, *, future: bool) -> Period | None:
        """Explicit dates/months first, then relative words, then "최근/향후 N개월"."""
        f = self.features
        iso = [
            p
            for p, period_tokens in zip(f.iso_periods, f.iso_tokens, strict=True)
            if not self.taken.intersection(period_tokens)
        ]
        if iso:
            first = min(p.start for p in iso)
            last = max(p.end for p in iso)
            whole = all(p.whole_months for p in iso)
            return Period(first, last, "", whole_months=whole)

        explicit = self._explicit_months(future)
        if explicit is not None:
            return explicit

        time_words = self.time_words
        if time_words:
            value, m = time_words[0]
            period = self._relative_period(value)
            edge = self.tokens[m.last + 1].form if m.last + 1 < len(self.tokens) else ""
            return _open_ended(period, _TIME_EDGES.get(edge), self.as_of, future)

        for number in self.numbers():
            span = self._span_period(number, future)
            if span is not None:
                return span
        return None

    def _explicit_months(self, future: bool) -> Period | None:
        """'2026년 5월', '5월', '5월~6월', '2025년', 'May 2026', '작년 하반기', '올해 1분기'."""
        as_of = self.as_of
        years = [n for n in self.free_numbers if n.unit == "year" and 1900 <= n.value <= 2999]
        relative_year = next(
            (_RELATIVE_YEARS[v] for v, _ in self.time_words if v in _RELATIVE_YEARS), None
        )
        year_hint = years[0].value if years else (
            as_of.year + relative_year if relative_year is not None else None
        )  # fmt: skip
        named = self._named_months(years, year_hint, future)
        if named is not None:
            return named
        part = self._quarter_or_half(year_hint, future)
        if part is not None:
            return part
        if len(years) >= 2:  # "2020년부터 2022년까지", "between 2019 and 2021"
            first_year, last_year = min(y.value for y in years), max(y.value for y in years)
            return months_period(
                dt.date(first_year, 1, 1), dt.date(last_year, 12, 1), f"{first_year}~{last_year}년"
            )
        if years:
            return year_period(years[0], as_of)
        return None

    def _named_months(self, years, year_hint: int | None, future: bool) -> Period | None:
        """Months by number or name, with their days ("3월 5일") or an edge ("3월부터",
        "since March")."""
        months: list[dt.date] = []
        days: list[dt.date] = []  # "3월 5일": a day, not the whole month
        edges: list[str] = []  # "3월부터", "7월 이후", "since March": the month opens a range
        for number in self.free_numbers:
            if number.unit != "month":
                continue
            adjacent_year = next((y.value for y in years if y.last + 1 == number.first), None)
            month = self._month_date(number.value, adjacent_year or year_hint, future)
            months.append(month)
            if number.modifier in _MONTH_EDGES:
                edges.append(_MONTH_EDGES[number.modifier])
            on = next(
                (d for d in self.free_numbers if d.unit == "days" and d.first == number.last + 1),
                None,
            )
            if on is not None and 1 <= on.value <= dates.month_end(month).day:
                days.append(month.replace(day=on.value))
        for i, value, year in self._english_month_tokens():
            months.append(self._month_date(value, year or year_hint, future))
            previous = self.tokens[i - 1].form.lower() if i > 0 else ""
            if previous in _ENGLISH_MONTH_EDGES:
                edges.append(_ENGLISH_MONTH_EDGES[previous])
        if len(months) == 1 and len(edges) == 1 and not days:
            one = months_period(months[0], months[0], dates.month_key(months[0]))
            return _open_ended(one, edges[0], self.as_of, future)
        if days and len(days) == len(months):
            first, last = min(days), max(days)
            return Period(
                first, last, f"{first.isoformat()}~{last.isoformat()}", whole_months=False
            )
        if months:
            first, last = min(months), max(months)
            label = "" if len(months) == 1 else f"{dates.month_key(first)}~{dates.month_key(last)}"
            return months_period(first, last, label)
        return None

    def _quarter_or_half(self, year_hint: int | None, future: bool) -> Period | None:
        """'1분기', 'Q2', '상반기', 'H2': of the year named, else the most recent such one (or the
        next one when looking ahead)."""
        quarters = [n.value for n in self.free_numbers if n.unit == "quarter" and 1 <= n.value <= 4]
        half = next((v for v, _ in self.time_words if v in ("h1", "h2")), None) or next(
            (f"h{n.value}" for n in self.free_numbers if n.unit == "half"), None
        )
        if not quarters and not half:
            return None
        first_month = 3 * quarters[0] - 2 if quarters else (1 if half == "h1" else 7)
        length = 3 if quarters else 6
        year = year_hint
        if year is None:
            year = self.as_of.year
            if not future and dt.date(year, first_month, 1) > self.as_of:
                year -= 1
        name = f"{quarters[0]}분기" if quarters else ("상반기" if half == "h1" else "하반기")
        return months_period(
            dt.date(year, first_month, 1),
            dt.date(year, first_month + length - 1, 1),
            f"{year}년 {name}",
        )

    def _english_months(self) -> list[tuple[int, int | None]]:
        return [(month, year) for _, month, year in self._english_month_tokens()]

    def _english_month_tokens(self, *, with_year_token: bool = False) -> list[tuple]:
        """(token index, month, year or None) of each English month name; with_year_token, the
        year's token index in place of the year."""
        out = []
        tokens = self.tokens
        for i, token in enumerate(tokens):
            if token.tag != "SL" or i in self.taken:
                continue
            month = _month_of(token.form)
            if month is None:
                continue
            year = year_at = None
            for j in (i + 1, i - 1):
                if 0 <= j < len(tokens) and tokens[j].tag == "SN":
                    value = parse_digits(tokens[j].form)
                    if value is not None and 1900 <= value <= 2999:
                        year, year_at = value, j
            # "may" is usually the verb; take it as May only with a year or "in/for May".
            previous = tokens[i - 1].form if i > 0 else ""
            beside_day = any(
                0 <= j < len(tokens) and tokens[j].tag == "SN" and tokens[j].form.isdigit()
                and int(tokens[j].form) <= 31
                for j in (i - 1, i + 1)
            )  # fmt: skip
            if (
                token.form == "may"
                and year is None
                and previous not in ("in", "for", "of")
                and not beside_day  # "born on 2 May"
            ):
                continue
            out.append((i, month, year_at if with_year_token else year))
        return out

    def _month_date(self, month: int, year: int | None, future: bool) -> dt.date:
        as_of = self.as_of
        if year is None or not 1900 <= year <= 2999:
            year = as_of.year
            # A bare month is the most recent one, or the next one when looking ahead (만기).
            if future and month < as_of.month:
                year += 1
            elif not future and month > as_of.month:
                year -= 1
        return dt.date(year, month, 1)

    def relative(self, word: str) -> Period | None:
        """The period a relative time word names ("this_month", "next_week", ...)."""
        return self._relative_period(word)

    def _relative_period(self, word: str) -> Period | None:
        as_of = self.as_of
        this_month = month_start(as_of)
        if word == "this_month":
            return months_period(this_month, this_month, "이번 달")
        if word == "last_month":
            m = add_months(this_month, -1)
            return months_period(m, m, "지난달")
        if word == "next_month":
            m = add_months(this_month, 1)
            return months_period(m, m, "다음 달")
        days = {"today": (0, "오늘"), "tomorrow": (1, "내일"), "yesterday": (-1, "어제")}
        if word in days:
            day = as_of + dt.timedelta(days=days[word][0])
            return Period(day, day, days[word][1], whole_months=False)
        weeks = {
            "this_week": (0, "이번 주"),
            "last_week": (-1, "지난주"),
            "next_week": (1, "다음 주"),
        }
        if word in weeks:
            monday = as_of - dt.timedelta(days=as_of.weekday()) + dt.timedelta(weeks=weeks[word][0])
            return Period(monday, monday + dt.timedelta(days=6), weeks[word][1], whole_months=False)
        quarters = {"this_quarter": (0, "이번 분기"), "last_quarter": (-3, "지난 분기"),
                    "next_quarter": (3, "다음 분기")}  # fmt: skip
        if word in quarters:
            first = add_months(dt.date(as_of.year, 3 * ((as_of.month - 1) // 3) + 1, 1),
                               quarters[word][0])  # fmt: skip
            return months_period(first, add_months(first, 2), quarters[word][1])
        years = {"this_year": (0, "올해"), "last_year": (-1, "작년"),
                 "year_before_last": (-2, "재작년"), "next_year": (1, "내년")}  # fmt: skip
        if word in years:
            delta, label = years[word]
            y = as_of.year + delta
            return months_period(dt.date(y, 1, 1), dt.date(y, 12, 1), label)
        return None  # 상반기/하반기 are resolved with explicit months (they can take a year)

    def _span_period(self, number: NumberMention, future: bool) -> Period | None:
        """'최근 3개월', '3개월 이내', '향후 2달', '3개월 전', 'last 6 months', '2주 이내'."""
        as_of = self.as_of
        n = number.value
        if n <= 0 or n > 120:
            return None
        if number.unit == "years":
            months = n * 12
        elif number.unit == "months":
            months = n
        elif number.unit in ("weeks", "days"):
            days = n * 7 if number.unit == "weeks" else n
            label_unit = "주" if number.unit == "weeks" else "일"
            if future or self.features.has("future"):
                return Period(as_of, as_of + dt.timedelta(days=days), f"{n}{label_unit} 이내",
                              whole_months=False)  # fmt: skip
            return Period(as_of - dt.timedelta(days=days - 1), as_of, f"최근 {n}{label_unit}",
                          whole_months=False)  # fmt: skip
        else:
            return None
        unit_label = f"{n}년" if number.unit == "years" else f"{n}개월"
        if number.modifier == "ago":
            m = add_months(month_start(as_of), -months)
            return months_period(m, m, f"{unit_label} 전")
        if number.modifier == "later":
            m = add_months(month_start(as_of), months)
            return months_period(m, m, f"{unit_label} 후")
        if number.modifier == "within":
            if future or self.features.has("future"):
                return Period(as_of, add_months(as_of, months), f"{unit_label} 이내",
                              whole_months=False)  # fmt: skip
            start = add_months(as_of, -months) + dt.timedelta(days=1)
            return Period(start, as_of, f"{unit_label} 이내", whole_months=False)
        if self.features.has("future") or (future and not self.features.has("recent")):
            first = add_months(month_start(as_of), 1)
            return months_period(first, add_months(first, months - 1), f"향후 {unit_label}")
        first = add_months(month_start(as_of), -(months - 1))
        return months_period(first, as_of, f"최근 {unit_label}")
