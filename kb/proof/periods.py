"""The proof-reader's reading of time: years with their comparison ("2024년 전에", "since 2025"),
quarters, halves, the year to date, months with a comparison ("3월부터", "before March"),
birth dates with a day ("2월 11일생", "1987.02.11생", "birthday on Feb 11"), and whether the
question names any time at all (a plan may not bring a window of its own).
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import re
from dataclasses import dataclass

from .quantities import (
    AFTER,
    BEFORE,
    BIRTH_YEAR,
    DECADE_YEARS,
    MONTH,
    UNTIL,
    YEAR,
    Quantity,
)

IN = "in"  # the window itself: the plan's dates lie inside it
TOUCH = "touch"  # one of several periods asked together: the plan's dates reach into it


@dataclass(frozen=True)
class Window:
    """A time the question names: `direction` IN means the plan's dates lie within [first,
    last]; AFTER that they start at `first`; BEFORE that they end before `first`; UNTIL that
    they end at `last`."""

    words: str
    first: dt.date
    last: dt.date
    direction: str
    exact: bool = False  # IN: the plan's window is this one, not only inside it
    fields: tuple[str, ...] = ()  # the date columns its words point at ("가입한": join dates)

    def shown(self, english: bool) -> str:
        span = f"{self.first.isoformat()}~{self.last.isoformat()}"
        if self.direction == AFTER:
            return f"from {self.first.isoformat()}" if english else f"{self.first.isoformat()} 이후"
        if self.direction == BEFORE:
            return f"before {self.first.isoformat()}" if english else f"{self.first.isoformat()} 전"
        if self.direction == UNTIL:
            return f"up to {self.last.isoformat()}" if english else f"{self.last.isoformat()}까지"
        return span


@dataclass(frozen=True)
class Birthday:
    words: str
    month: int
    day: int
    year: int | None


_MONTHS_EN = (
    {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
    | {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
    | {"sept": 9}
)
_ORDINAL = {"first": 1, "1st": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4,
            "4th": 4}  # fmt: skip
_RELATIVE_YEARS = [
    (r"재작년|year before last", -2),
    (r"(?<!재)작년|지난\s?해|전년|last year|previous year", -1),
    (r"내년|다음\s?해|next year", 1),
    (r"올해|올\s|올$|금년|이번\s?해|this year|current year", 0),
]
_MONTH_OFFSETS = (
    (r"지난\s?달|저번\s?달|전월|전달|last month|previous month", -1),
    (r"이번\s?달|이달|금월|당월|this month", 0),
    (r"다음\s?달|담달|내달|익월|next month", 1),
)
_EDGE_AFTER = re.compile(r"\s?(?:에|의)?\s?(?:이후|이전|부터|까지|전|후|안|내|말|초)")
_RELATIVE_MONTH = re.compile("|".join(k for k, _ in _MONTH_OFFSETS), re.IGNORECASE)


def _add_months(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 + months
    return dt.date(index // 12, index % 12 + 1, 1)


_QUARTER = re.compile(
    r"(?:([1-4])\s?(?:사)?분기|[Qq]([1-4])\b|\b([1-4])[Qq]\b|\b(first|second|third|fourth|1st|2nd|"
    r"3rd|4th) quarter)",
    re.IGNORECASE,
)
_HALF = re.compile(r"(상반기|하반기|\bH[12]\b|\bfirst half\b|\bsecond half\b)", re.IGNORECASE)
_YTD = re.compile(r"\bYTD\b|year to date|year-to-date|연초\s?(?:부터|이후)|올해\s?들어", re.I)
_MONTH_WITH_DIRECTION = re.compile(
    r"(?<!\d)(1[0-2]|[1-9])\s?월\s?(?:달)?\s?(?:에|의)?\s?(부터|이후|이전|전|까지)|"
    r"\b(since|after|before|until|from)\s+("
    + "|".join(sorted(_MONTHS_EN, key=len, reverse=True))
    + r")\b(?!\s+\d{1,2}\b)",
    re.IGNORECASE,
)
_BIRTH_MARK = re.compile(
    r"생일|생년월일|태어난|태어나|출생|\d\s?일\s?생|\d생|born|birthday|birth", re.I
)
_KO_MONTH_DAY = re.compile(
    r"(?:(\d{4})\s?년\s?)?(1[0-2]|0?[1-9])\s?월\s?(3[01]|[12]\d|0?[1-9])\s?일"
)
_DOTTED_DATE = re.compile(r"(\d{4})[-./](\d{1,2})[-./](\d{1,2})")
_EN_MONTH_DAY = re.compile(
    r"\b("
    + "|".join(sorted(_MONTHS_EN, key=len, reverse=True))
    + r")\.?\s+(\d{1,2})(?:st|nd|rd|th)?"
    r"\b|\b(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?("
    + "|".join(sorted(_MONTHS_EN, key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)
# Any mention of time: without one, a plan's date window is the plan's own invention.
_TIME_WORDS = re.compile(
    r"\d{4}|\d\s?(?:년|월|일|주|개월|달|분기|days?|weeks?|months?|years?)\b|\d\s?(?:년|월|일|주|"
    r"개월|달|분기)|[Qq][1-4]|[1-4][Qq]|\bH[12]\b|분기|반기|올해|올\s|금년|작년|지난|재작년|내년|"
    r"이번|다음|저번|전월|익월|금월|당월|이달|내달|담달|최근|요즘|근래|오늘|어제|내일|그제|모레|"
    r"연초|연말|월초|월말|연도|년도|기간|\bYTD\b|\b(?:year|month|week|quarter|half|today|"
    r"yesterday|tomorrow|recent|recently|lately|since|before|after|ago|within|until|last|next|"
    r"this|past|during|between)\b|이내|동안|이후|이전|부터|까지|\d{4}[-./]\d|생일|생년월일|"
    r"태어|출생|\d\s?생|born|birth|" + "|".join(rf"\b{m}\b" for m in _MONTHS_EN),
    re.IGNORECASE,
)
# Words that give maturing contracts a window of their own (kb.catalogue.EXPIRING_SOON_MONTHS),
# unless the question asks for the nearest one ("가장 임박한"), which is a ranking, not a window.
_SOON = re.compile(r"예정|도래|임박|다가오|다가올|앞둔|앞두|곧|앞으로|향후|upcoming|soon|expiring|"
                   r"coming up|due to", re.I)  # fmt: skip
_NEAREST = re.compile(r"가장|제일|젤|최근접|nearest|soonest|earliest|closest|most imminent|"
                      r"next (?:one|contract)", re.I)  # fmt: skip


def mentions_time(text: str) -> bool:
    return bool(_TIME_WORDS.search(text))


def soon_window_allowed(text: str) -> bool:
    """'만기 예정 계약': a window the catalogue's convention gives; '가장 임박한 만기': none."""
    return bool(_SOON.search(text)) and not _NEAREST.search(text)


def windows(text: str, numbers: list[Quantity], as_of: dt.date) -> list[Window]:
    """Every time window the question names, with its direction and the date it is about."""
    return [
        dataclasses.replace(w, fields=_fields_of(text, w.words))
        for w in _windows(text, numbers, as_of)
    ]


# Which date a window is about, from the words beside it: "2024년에 가입한" (joined or started),
# "2020년 이후 만기" (end date), "that started since 2020", "만기가 2027년까지인".
_DATE_CUES = (
    (r"가입|joined|join|signed up|sign up|가입일", ("joined_on", "start_date")),
    (r"계약한|계약된|시작|개시|started|start|signed|계약일", ("start_date",)),
    (r"만기|만료|matur|expir|ending|ends|만기일", ("end_date",)),
    (r"태어|출생|생\b|born|생년월일|생일", ("birth_date",)),
    (r"납입|납부|입금|paid|due|낸|들어온|받은", ("due_month", "due_date", "paid_date")),
)
_CUE_AFTER = re.compile(
    r"^\s?(?:년|년도)?\s?(?:에|에서|부터|이후|이전|전에|전|까지|후에|보다\s?\S+)?\s?(\S+)"
)


def _fields_of(text: str, words: str) -> tuple[str, ...]:
    at = text.find(words)
    if at < 0:
        return ()
    after = _CUE_AFTER.match(text[at + len(words) :])
    before = text[max(0, at - 24) : at]
    for place in ([after.group(1)] if after else []) + [before[-20:]]:
        for pattern, fields in _DATE_CUES:
            if re.search(pattern, place, re.IGNORECASE):
                return fields
    return ()


def _windows(text: str, numbers: list[Quantity], as_of: dt.date) -> list[Window]:
    found: list[Window] = []
    spans: list[tuple[int, int]] = []
    for m in _QUARTER.finditer(text):
        index = int(m.group(1) or m.group(2) or m.group(3) or _ORDINAL[m.group(4).lower()])
        year = _year_near(text, m.start(), m.end(), as_of, first_month=3 * index - 2)
        first = dt.date(year, 3 * index - 2, 1)
        found.append(Window(m.group(0), first, _month_end(year, 3 * index), IN, exact=True))
        spans.append(_year_span(text, m.start(), m.end()))
    for m in _HALF.finditer(text):
        second = m.group(1).lower() in ("하반기", "h2", "second half")
        year = _year_near(text, m.start(), m.end(), as_of, first_month=7 if second else 1)
        first = dt.date(year, 7 if second else 1, 1)
        found.append(Window(m.group(0), first, _month_end(year, 12 if second else 6), IN, True))
        spans.append(_year_span(text, m.start(), m.end()))
    for m in _RELATIVE_MONTH.finditer(text):  # "지난달하고 이번 달": each month is asked
        if _BIRTH_MARK.search(text) or _EDGE_AFTER.match(text, m.end()):
            continue  # "이번 달이 생일인", "다음 달 이후": a birthday or an edge, not the month
        offset = next(o for k, o in _MONTH_OFFSETS if re.fullmatch(k, m.group(0), re.I))
        month = _add_months(dt.date(as_of.year, as_of.month, 1), offset)
        found.append(Window(m.group(0), month, _month_end(month.year, month.month), TOUCH))
    for m in _YTD.finditer(text):
        found.append(Window(m.group(0), dt.date(as_of.year, 1, 1), as_of, IN, exact=False))
    for m in _MONTH_WITH_DIRECTION.finditer(text):
        found.append(_month_window(m, text, as_of))
    years = [q for q in numbers if not any(a <= q.start < b for a, b in spans)]
    # the year of a quarter or a half ("2025년 2분기") is read with it, above
    for q, joined in _year_ranges(text, years):
        if joined is not None:  # "1970년부터 1979년 사이", "between 2019 and 2021"
            opening, closing = _year_window(q, as_of), _year_window(joined, as_of)
            if opening is not None and closing is not None:
                words = text[q.start : joined.end]
                found.append(Window(words, opening.first, closing.last, IN, exact=True))
            continue
        window = _year_window(q, as_of)
        if window is not None and not _MONTH_AFTER.match(text, q.end):
            found.append(window)  # a year with a month after it is a date, read as one
    return found


_MONTH_AFTER = re.compile(r"\s?(?:에|의)?\s?\d{1,2}\s?월")
_RANGE_JOIN = re.compile(
    r"\s?(?:년)?\s?(?:에서|부터|~|-|–|to|and|through|until|thru)\s?$", re.IGNORECASE
)


def _year_ranges(text: str, years: list[Quantity]):
    """Each year quantity, paired with the year that closes its range (or None)."""
    skip = set()
    for i, q in enumerate(years):
        if i in skip:
            continue
        nxt = years[i + 1] if i + 1 < len(years) else None
        if (
            nxt is not None
            and q.unit in (YEAR, BIRTH_YEAR, DECADE_YEARS)
            and nxt.unit in (YEAR, BIRTH_YEAR, DECADE_YEARS)
            and _RANGE_JOIN.match(text[q.start + len(q.words) : nxt.start])
        ):
            skip.add(i + 1)
            yield q, nxt
        else:
            yield q, None


def birthdays(text: str) -> list[Birthday]:
    """Birth dates with a day: "생일이 2월 11일", "2월 11일생", "1987.02.11생", "born on 3 May"."""
    if not _BIRTH_MARK.search(text):
        return []
    found = []
    for m in _KO_MONTH_DAY.finditer(text):
        year = int(m.group(1)) if m.group(1) else None
        found.append(Birthday(m.group(0), int(m.group(2)), int(m.group(3)), year))
    for m in _DOTTED_DATE.finditer(text):
        found.append(Birthday(m.group(0), int(m.group(2)), int(m.group(3)), int(m.group(1))))
    for m in _EN_MONTH_DAY.finditer(text):
        month = _MONTHS_EN[(m.group(1) or m.group(4)).lower()]
        day = int(m.group(2) or m.group(3))
        year_after = re.match(r",?\s+(\d{4})\b", text[m.end() :])
        found.append(
            Birthday(m.group(0), month, day, int(year_after.group(1)) if year_after else None)
        )
    return [b for b in found if _valid_day(b.month, b.day)]


def _valid_day(month: int, day: int) -> bool:
    try:
        dt.date(2024, month, day)
    except ValueError:
        return False
    return True


def _month_end(year: int, month: int) -> dt.date:
    return dt.date(year, month, calendar.monthrange(year, month)[1])


def _year_near(text: str, start: int, end: int, as_of: dt.date, first_month: int = 1) -> int:
    """The year a quarter, half or month belongs to: written beside it, relative, or else the
    most recent such one (a quarter still ahead is last year's, unless the question looks
    ahead)."""
    before, after = text[max(0, start - 16) : start], text[end : end + 12]
    written = re.search(r"(\d{4})\s?(?:년\s?(?:도)?)?\s?(?:의)?\s?$", before) or re.match(
        r"\s?(?:of\s+)?(\d{4})\b", after
    )
    if written:
        return int(written.group(1))
    short = re.search(r"(?<!\d)(\d{2})\s?년\s?$", before)
    if short:
        return 2000 + int(short.group(1))
    for pattern, offset in _RELATIVE_YEARS:
        if re.search(pattern, before, re.IGNORECASE) or re.search(pattern, after, re.I):
            return as_of.year + offset
    ahead = _SOON.search(text) or re.search(r"다음|next|내년|향후", text, re.IGNORECASE)
    if dt.date(as_of.year, first_month, 1) > as_of and not ahead:
        return as_of.year - 1
    return as_of.year


def _year_span(text: str, start: int, end: int) -> tuple[int, int]:
    return max(0, start - 16), end + 12


def _month_window(m: re.Match, text: str, as_of: dt.date) -> Window:
    if m.group(1):
        month, word = int(m.group(1)), m.group(2)
        direction = {"부터": AFTER, "이후": AFTER, "이전": BEFORE, "전": BEFORE, "까지": UNTIL}[
            word
        ]
    else:
        word, month = m.group(3).lower(), _MONTHS_EN[m.group(4).lower()]
        direction = {"since": AFTER, "after": AFTER, "from": AFTER, "before": BEFORE,
                     "until": UNTIL}[word]  # fmt: skip
    year = _year_near(text, m.start(), m.start(), as_of)
    first, last = dt.date(year, month, 1), _month_end(year, month)
    if word == "after":  # "after March": from April
        first = last + dt.timedelta(days=1)
    return Window(m.group(0), first, last, direction)


def _year_window(q: Quantity, as_of: dt.date) -> Window | None:
    if q.unit not in (YEAR, BIRTH_YEAR, DECADE_YEARS):
        return None
    year = q.value
    if year < 100:  # "87년생"
        century = as_of.year // 100 * 100
        year = century + year if century + year <= as_of.year else century - 100 + year
    if not 1900 <= year <= 2999:
        return None
    last_year = year + 9 if q.unit == DECADE_YEARS else year
    first, last = dt.date(year, 1, 1), dt.date(last_year, 12, 31)
    if q.direction in (AFTER, BEFORE, UNTIL):
        return Window(q.words, first, last, q.direction)
    if q.direction is None:
        return Window(q.words, first, last, IN)
    return None


def relative_year(text: str, as_of: dt.date) -> list[Window]:
    """올해, 작년, last year… alone: the plan's dates lie in that year."""
    found = []
    for pattern, offset in _RELATIVE_YEARS:
        for m in re.finditer(pattern, text, re.IGNORECASE):
            if _MONTH_AFTER.match(text, m.end()) or re.match(r"\s?\d", text[m.end() :]):
                continue  # "작년 3월": a month, read by the reader's own period rules
            year = as_of.year + offset
            found.append(Window(m.group(0).strip(), dt.date(year, 1, 1), dt.date(year, 12, 31), IN))
    return found


__all__ = ["IN", "MONTH", "Birthday", "Window", "birthdays", "mentions_time", "windows"]
