"""Recognition: a normalised prompt -> Kiwi tokens plus what they mean (ids, numbers, phrases).

Everything here is evidence only; `parser` decides what plan it adds up to.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from .dates import Period, month_period
from .lexicon import NOT_NAMES, Match, Token, analyse, lexicon_for
from .numbers import (
    MAGNITUDE_WORDS,
    english_number,
    english_number_word,
    english_words_value,
    korean_amount,
    native_korean_number,
    parse_digits,
    sino_korean_number,
)
from .vocabulary import Vocabulary

# A-Z/0-9 identifiers are matched by pattern (they are ids, not words).
_CUSTOMER_ID = re.compile(r"(?<![A-Za-z0-9])[Cc](\d{4})(?!\d)")
_CONTRACT_ID = re.compile(r"(?<![A-Za-z0-9])[Kk](\d{5})(?!\d)")
_STAKEHOLDER_OR_BRANCH_ID = re.compile(
    r"(?<![A-Za-z0-9])(?:KB-[A-Z]-\d{3}|BR-[A-Z]{2})(?![A-Za-z0-9])", re.IGNORECASE
)
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})[-./](\d{1,2})(?:[-./](\d{1,2}))?(?![\d])")

# Counters after a number, and the kind of quantity they make.
_COUNTERS = {
    "명": "count", "개": "count", "건": "count", "곳": "count", "위": "count", "가지": "count",
    "등": "count", "개월": "months", "달": "months", "년": "years", "주": "weeks", "주일": "weeks",
    "일": "days", "월": "month", "세": "age", "살": "age", "대": "decade", "원": "won",
    "분기": "quarter", "년대": "decade_years", "month": "months", "months": "months",
    "year": "years", "years": "years", "week": "weeks", "weeks": "weeks", "day": "days",
    "days": "days", "won": "won", "krw": "won",
}  # fmt: skip
_ENGLISH_MAGNITUDES = {"thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_ENGLISH_COUNT_NOUNS = frozenset(
    "customers customer clients people items records rows contracts policies products branches "
    "planners agents".split()
)
# Words right after a number that say how it is meant ("3개월 이내", "10만원 이상").
_NUMBER_MODIFIERS = {
    "이내": "within", "내": "within", "안": "within", "안쪽": "within", "전": "ago", "후": "later",
    "뒤": "later", "간": "during", "동안": "during", "이상": "gte", "초과": "gt", "이하": "lte",
    "미만": "lt", "넘게": "gt", "ago": "ago", "later": "later", "이후": "from", "부터": "from",
    "이전": "before", "밑": "lt", "아래": "lt",
}  # fmt: skip
# English words before a year that say how it is meant ("after 1990", "since 2023").
_YEAR_PREPOSITIONS = {"in": None, "during": None, "of": None, "born": None, "since": "from",
                      "from": "from", "after": "after", "before": "before", "between": None,
                      "and": None, "to": None, "through": None, "until": None}  # fmt: skip
_NATIVE_DETERMINERS = {"한", "두", "세", "석", "서", "네", "넉", "너", "스무", "닷", "엿"}
# Frequent Korean surnames: a customer name must start with one (names match by pattern only).
SURNAMES = set(
    "김이박최정강조윤장임한오서신권황안송류전홍고문양손배백허유남심노하곽"
    "성차주우구민진지엄채원천방공현함변염여추도소석선설마길연위표명기반라"
    "왕금옥육인맹제모탁국어은편용예경봉사부가복태목형피두감음빈동온호범좌"
    "팽승간상갈단견당화창"
)
_HANGUL_NAME = re.compile(r"^[가-힣]{2,4}$")
_DOUBLESURNAMES = frozenset({"남궁", "황보", "제갈", "선우", "독고", "사공", "서문", "동방"})
_QUOTED_NAME = re.compile(r"['\"“”‘’「」『』]([가-힣]{2,4})['\"“”‘’「」『』]")
_HONORIFICS = {"님", "씨"}


@dataclass
class NumberMention:
    value: int
    unit: str | None  # count, months, years, weeks, days, month, year, age, decade, won, quarter
    first: int  # token index range, including a consumed modifier such as 이내/이상
    last: int
    modifier: str | None = None  # within, ago, later, during, gte, gt, lte, lt
    counter: str | None = None  # the counter word itself (명, 곳, 개월, ...)


@dataclass
class Features:
    """Everything recognised in one prompt, before it is turned into a plan."""

    matches: list[Match] = field(default_factory=list)
    numbers: list[NumberMention] = field(default_factory=list)
    customer_ids: list[str] = field(default_factory=list)
    contract_ids: list[str] = field(default_factory=list)
    id_tokens: set[int] = field(default_factory=set)  # the tokens of customer and contract ids
    customer_names: list[str] = field(default_factory=list)
    name_tokens: dict[str, tuple[int, ...]] = field(default_factory=dict)  # name -> its tokens
    iso_periods: list[Period] = field(default_factory=list)
    iso_tokens: list[tuple[int, ...]] = field(default_factory=list)  # each iso period's tokens
    corrected: list[tuple[str, str]] = field(default_factory=list)  # (as written, read as)
    recognised: set[int] = field(default_factory=set)  # token indices something above used
    _by_kind: dict | None = field(default=None, repr=False)
    _pairs: frozenset = field(default=frozenset(), repr=False)
    _values: dict = field(default_factory=dict, repr=False)

    def _index(self) -> dict:
        # The reader asks dozens of times per prompt; matches are final once recognised, so
        # they are indexed by kind on the first question.
        by_kind: dict[str, list[tuple[Any, Match]]] = {}
        for m in self.matches:
            for k, value in m.payloads:
                by_kind.setdefault(k, []).append((value, m))
        self._by_kind = by_kind
        self._pairs = frozenset((k, v) for m in self.matches for k, v in m.payloads)
        return by_kind

    def kinds(self, kind: str) -> list[tuple[Any, Match]]:
        """(value, match) of every match of `kind`; the caller must not change the list."""
        return (self._by_kind or self._index()).get(kind, _NONE)

    def values(self, kind: str) -> tuple[Any, ...]:
        values = self._values.get(kind)
        if values is None:
            values = self._values[kind] = tuple(dict.fromkeys(v for v, _ in self.kinds(kind)))
        return values

    def has(self, kind: str, value: object = None) -> bool:
        by_kind = self._by_kind or self._index()
        if value is None:
            return kind in by_kind
        return (kind, value) in self._pairs


_NONE: list = []


# ---------------------------------------------------------------------------------------------
# Recognition: Kiwi tokens -> ids, numbers, lexicon matches, customer names


def recognise(text: str, vocabulary: Vocabulary) -> tuple[list[Token], Features]:
    """Tokenise and label: ids and dates by pattern, then numbers, phrases, typos and names.

    Each stage blocks the tokens it used, so later stages cannot read them a second time.
    """
    lexicon = lexicon_for(vocabulary)
    tokens = analyse(text)
    features = Features()
    blocked: set[int] = set()
    id_matches: list[Match] = []

    def block_span(start: int, end: int) -> tuple[int, ...]:
        covered = tuple(i for i, t in enumerate(tokens) if t.start < end and t.end > start)
        blocked.update(covered)
        return covered

    for m in _CUSTOMER_ID.finditer(text):
        features.customer_ids.append(f"C{m.group(1)}")
        features.id_tokens.update(block_span(m.start(), m.end()))
    for m in _CONTRACT_ID.finditer(text):
        features.contract_ids.append(f"K{m.group(1)}")
        features.id_tokens.update(block_span(m.start(), m.end()))
    for m in _ISO_DATE.finditer(text):
        period = _iso_period(m)
        if period is not None:
            features.iso_periods.append(period)
            features.iso_tokens.append(block_span(m.start(), m.end()))

    # Stakeholder and branch ids ("KB-P-003", "BR-GN") only count when the vocabulary knows them.
    for m in _STAKEHOLDER_OR_BRANCH_ID.finditer(text):
        code = m.group(0).upper()
        kind = "planner" if code in vocabulary.planners else "branch"
        if code in vocabulary.planners or code in vocabulary.branches:
            covered = [i for i, t in enumerate(tokens) if t.start < m.end() and t.end > m.start()]
            if covered:
                id_matches.append(Match(((kind, code),), covered[0], covered[-1], m.group(0)))
                blocked.update(covered)

    features.numbers = _quarters(tokens, blocked) + _scan_numbers(tokens, blocked, text)
    for number in features.numbers:
        blocked.update(range(number.first, number.last + 1))
    features.matches = id_matches + lexicon.match(tokens, text, blocked)
    for match in features.matches:
        blocked.update(range(match.first, match.last + 1))
    typos = lexicon.typo_matches(tokens, text, blocked)
    for match in typos:
        blocked.update(range(match.first, match.last + 1))
    features.matches = sorted(features.matches + typos, key=lambda m: m.first)
    features.corrected = [(text[tokens[m.first].start : tokens[m.last].end], m.text) for m in typos]
    features.name_tokens = _customer_names(tokens, text, features, blocked, lexicon.keys)
    features.customer_names = list(features.name_tokens)
    features.recognised = blocked
    return tokens, features


def _iso_period(m: re.Match) -> Period | None:
    year, month = int(m.group(1)), int(m.group(2))
    if not (1900 <= year <= 2999 and 1 <= month <= 12):
        return None
    if m.group(3):
        try:
            day = dt.date(year, month, int(m.group(3)))
        except ValueError:
            return None
        return Period(day, day, day.isoformat(), whole_months=False)
    return month_period(year, month)


def _number_value(token: Token) -> int | None:
    if token.tag == "SN":
        return parse_digits(token.form)
    if token.tag == "NR":
        value = native_korean_number(token.form)
        return value if value is not None else sino_korean_number(token.form)
    if token.tag == "SL":
        return english_number(token.form)
    return None


def _a_month_paid(mention: NumberMention, tokens: list[Token], text: str) -> bool:
    """'한 달에 내는', '한 달에 나가는': per month, not a period of one month."""
    if mention.value != 1 or mention.unit != "months" or not text:
        return False
    rest = text[tokens[mention.last].end :]
    return re.match(r"에\s?(?:내|나가|납입|납부)", rest) is not None


def _quarters(tokens: list[Token], blocked: set[int]) -> list[NumberMention]:
    """'Q2', '2Q': a quarter (read like "2분기"), 'H1' a half (상반기); blocks their tokens, and
    a year written after them ("Q1 2026")."""
    found = []
    for i in range(len(tokens) - 1):
        a, b = tokens[i], tokens[i + 1]
        if i in blocked or b.start != a.end:
            continue
        if a.form.lower() == "q" and b.tag == "SN" and b.form in ("1", "2", "3", "4"):
            found.append(NumberMention(int(b.form), "quarter", i, i + 1, counter="Q"))
        elif a.tag == "SN" and a.form in ("1", "2", "3", "4") and b.form.lower() == "q":
            found.append(NumberMention(int(a.form), "quarter", i, i + 1, counter="Q"))
        elif a.form.lower() == "h" and b.tag == "SN" and b.form in ("1", "2"):
            found.append(NumberMention(int(b.form), "half", i, i + 1, counter="H"))  # "H1"
        else:
            continue
        year = parse_digits(tokens[i + 2].form) if i + 2 < len(tokens) else None
        if year is not None and 1900 <= year <= 2999 and tokens[i + 2].tag == "SN":
            found.append(NumberMention(year, "year", i + 2, i + 2, counter=""))  # "Q1 2026"
    for n in found:
        blocked.update(range(n.first, n.last + 1))
    return found


def _scan_numbers(tokens: list[Token], blocked: set[int], text: str = "") -> list[NumberMention]:
    """Numbers with their counter and modifier: "3개월 이내", "다섯 명", "10만 원 이상", "top 5"."""
    found: list[NumberMention] = []
    i = 0
    while i < len(tokens):
        read = None if i in blocked else _read_number(tokens, i, text)
        if read is None:
            i += 1
            continue
        value, last = read
        mention = NumberMention(value=value, unit=None, first=i, last=last)
        _attach_counter(mention, tokens, blocked)
        if _a_month_paid(mention, tokens, text):
            i = mention.last + 1  # "한 달에 내는 보험료": the monthly premium, read as a phrase
            continue
        _attach_modifier(mention, tokens, blocked)
        _attach_particle_bound(mention, tokens, text)
        found.append(mention)
        i = mention.last + 1
    return found


def _read_number(tokens: list[Token], i: int, text: str = "") -> tuple[int, int] | None:
    """The number starting at token i and the index of its last token, or None.

    Digits and Sino-Korean numerals with their unit parts are one amount read by grammar
    ("천오백만", "7천5백만", "3만5천", "1.2억", "30k", "1.5M"); large amounts written in parts
    ("1억 5천만") join when a part ending in 만/억 is followed by a smaller one.
    """
    amount = _read_amount(tokens, i, text)
    if amount is not None:
        return amount
    read = _read_number_part(tokens, i)
    if read is None:
        return None
    value, last = read
    while value >= 10_000 and value % 10_000 == 0 and last + 1 < len(tokens):
        following = _read_number_part(tokens, last + 1)
        if following is None or following[0] >= value or following[0] % 1000:
            break
        value, last = value + following[0], following[1]
    return value, last


_SINO_CHARS = frozenset("영공일이삼사오육칠팔구십백천만억조")
_SHORT_SCALES = {"k": 1_000, "m": 1_000_000}  # "30k", "1.5M", written against the digits


def _amount_token(token: Token) -> bool:
    if token.tag == "SN":
        return bool(re.fullmatch(r"\d[\d,]*(?:\.\d+)?", token.form))
    return token.tag == "NR" and bool(token.form) and set(token.form) <= _SINO_CHARS


def _read_amount(tokens: list[Token], i: int, text: str = "") -> tuple[int, int] | None:
    """A run of digit and Sino-Korean numeral tokens read as one amount, with the longest
    reading that makes a whole number; None when the run is a plain native or English numeral
    (read by _read_number_part)."""
    first = tokens[i]
    # "만오백이십원": Kiwi reads a leading 만 as a determiner ("full", "only") before numerals
    leading_unit = (
        first.tag == "MM"
        and first.form in ("만", "억", "천")
        and i + 1 < len(tokens)
        and tokens[i + 1].start == first.end
        and _amount_token(tokens[i + 1])
        and tokens[i + 1].tag == "NR"
    )
    if not (_amount_token(first) or leading_unit):
        return None
    last = i
    parts = [[*_dropped_lead(tokens, i, text), tokens[i].form]]  # with a numeral Kiwi dropped
    while last + 1 < len(tokens) and _amount_token(tokens[last + 1]):
        nxt, current = tokens[last + 1], tokens[last]
        gap = text[current.end : nxt.start]
        # "억이천만": Kiwi reads the 이 of 이천 as a subject particle and leaves it out
        dropped = len(gap) == 1 and gap in _SINO_CHARS
        touching = nxt.start == current.end or dropped
        # "1억 5천만": a space between parts only after 만/억, before a part with its own unit
        continued = current.form[-1] in "만억조" and (
            (nxt.tag == "NR" and any(ch in "십백천만" for ch in nxt.form))
            or _has_unit(tokens, last + 1)
        )
        if not (touching or continued):
            break
        parts.append([gap, nxt.form] if dropped else [nxt.form])
        last += 1
    while last >= i:
        value = korean_amount([part for token in parts[: last - i + 1] for part in token])
        if value is not None:
            break
        last -= 1
    if value is None:
        return None
    scale = tokens[last + 1] if last + 1 < len(tokens) else None
    if scale is not None and scale.tag == "SL" and scale.form.lower() in _SHORT_SCALES:
        if scale.start == tokens[last].end:
            value, last = value * _SHORT_SCALES[scale.form.lower()], last + 1
    while last + 1 < len(tokens) and tokens[last + 1].form in _ENGLISH_MAGNITUDES:
        value, last = value * _ENGLISH_MAGNITUDES[tokens[last + 1].form], last + 1
    if value != int(value) or (last == i and tokens[i].tag == "SN" and "." not in tokens[i].form
                               and parse_digits(tokens[i].form) is None):  # fmt: skip
        return None
    if last == i and tokens[i].tag == "NR" and len(tokens[i].form) == 1:
        return None  # a lone 천/만 is read below with what follows it
    return int(value), last


def _dropped_lead(tokens: list[Token], i: int, text: str) -> list[str]:
    """ "보험료 이천구백원": the 이 of 이천 that Kiwi took for a subject particle and dropped. A
    particle never starts a word, nor follows a syllable without a final consonant (that takes
    가), so there 이 is the numeral; after "금액이" it is the particle."""
    at = tokens[i].start - 1
    if at < 0 or not text or text[at] not in _SINO_CHARS:
        return []
    previous = tokens[i - 1] if i else None
    # dropped, or kept as one character of another kind ("이" as an interjection, IC)
    if (
        previous is not None
        and previous.end > at
        and (previous.start, previous.end) != (at, at + 1)
    ):
        return []
    before = text[at - 1] if at else " "
    vowel_final = "\uac00" <= before <= "\ud7a3" and (ord(before) - 0xAC00) % 28 == 0
    return [text[at]] if before.isspace() or vowel_final else []


def _has_unit(tokens: list[Token], j: int) -> bool:
    """A digit part followed, touching, by 천/백/십 ("5천만")."""
    return (
        j + 1 < len(tokens)
        and tokens[j + 1].tag == "NR"
        and tokens[j + 1].start == tokens[j].end
        and any(ch in "십백천만" for ch in tokens[j + 1].form)
    )


def _read_english_words(tokens: list[Token], i: int) -> tuple[int, int] | None:
    """'twenty-five', 'sixty five', 'two hundred': number words read together (text2num)."""
    last = i
    while last + 1 < len(tokens) and english_number_word(tokens[last + 1].form):
        if tokens[last + 1].start - tokens[last].end > 1:
            break
        last += 1
    while last >= i:
        words = " ".join(t.form.lower() for t in tokens[i : last + 1])
        value = english_words_value(words)
        if value is not None:
            while last + 1 < len(tokens) and tokens[last + 1].form in _ENGLISH_MAGNITUDES:
                value, last = value * _ENGLISH_MAGNITUDES[tokens[last + 1].form], last + 1
            return value, last
        last -= 1
    return None


def _read_number_part(tokens: list[Token], i: int) -> tuple[int, int] | None:
    token, n = tokens[i], len(tokens)
    if token.tag == "SL" and english_number_word(token.form):
        words = _read_english_words(tokens, i)
        if words is not None:
            return words
    value = _number_value(token)
    if value is None and token.tag == "MM" and token.form in _NATIVE_DETERMINERS:
        # 한/두/세 are numbers only in front of a counter ("세 명"), not in "세 번째".
        if i + 1 < n and tokens[i + 1].form in _COUNTERS:
            value = native_korean_number(token.form)
    if value is None:
        return None
    last = i
    # 열 다섯 -> 15, 스물 한 -> 21
    while last + 1 < n and value % 10 == 0 and 10 <= value < 100:
        nxt = tokens[last + 1]
        unit = native_korean_number(nxt.form) if nxt.tag in ("NR", "MM") else None
        if unit is None or unit >= 10:
            break
        value, last = value + unit, last + 1
    # 10만, 3천, 5천만 (Kiwi keeps 천만 as one token; the 원 after them is the counter)
    while last + 1 < n and tokens[last + 1].tag == "NR" and _is_magnitude(tokens[last + 1].form):
        value, last = value * (sino_korean_number(tokens[last + 1].form) or 1), last + 1
    # "50 million", "30 thousand"
    while last + 1 < n and tokens[last + 1].form in _ENGLISH_MAGNITUDES:
        value, last = value * _ENGLISH_MAGNITUDES[tokens[last + 1].form], last + 1
    return value, last


def _is_magnitude(word: str) -> bool:
    return bool(word) and all(ch in MAGNITUDE_WORDS for ch in word)


def _attach_counter(mention: NumberMention, tokens: list[Token], blocked: set[int]) -> None:
    following = mention.last + 1
    if following >= len(tokens) or following in blocked:
        return
    nxt, value = tokens[following], mention.value
    unit = _COUNTERS.get(nxt.form)
    if unit == "month" and not 1 <= value <= 12:
        unit = None
    elif unit == "decade" and not (value % 10 == 0 and 10 <= value <= 90):
        unit = None
    elif unit == "years" and value >= 1900:
        unit = "year"  # "2026년" is a calendar year, "3년" a length of time
    elif unit == "decade_years" and not (value % 10 == 0 and (value < 100 or 1900 <= value)):
        unit = None
    elif unit == "days" and nxt.tag not in ("NNB", "SL"):
        unit = None
    if unit in ("years", "year") and _form_at(tokens, following + 1) == "old":
        # "60 years old" is an age, not a span of time
        mention.unit, mention.last, mention.counter = "age", following + 1, "years old"
    elif unit is not None:
        mention.unit, mention.last, mention.counter = unit, following, nxt.form
    elif nxt.form == "s" and nxt.tag == "SL" and value % 10 == 0:
        # "in their 40s" (an age decade), "the 1960s" (a decade of years)
        if 10 <= value <= 90:
            mention.unit, mention.last, mention.counter = "decade", following, "s"
        elif 1900 <= value <= 2990:
            mention.unit, mention.last, mention.counter = "decade_years", following, "s"
    elif nxt.form in _ENGLISH_COUNT_NOUNS and value < 1000:
        mention.unit = "count"  # "5 customers": the noun stays free for entity detection


def _form_at(tokens: list[Token], i: int) -> str:
    return tokens[i].form if 0 <= i < len(tokens) else ""


def _attach_modifier(mention: NumberMention, tokens: list[Token], blocked: set[int]) -> None:
    """이내/전/후/동안/이상/미만 right after the number ("3개월 이내", "10만원 이상"), and the
    preposition before it that says how it is meant ("within 3 months", "after 1990"), which
    then belongs to the mention."""
    following = mention.last + 1
    previous = tokens[mention.first - 1].form if mention.first > 0 else ""
    free_before = mention.first > 0 and mention.first - 1 not in blocked
    if previous == "within":
        mention.modifier = "within"
        if free_before:
            mention.first -= 1
    elif (
        mention.unit is None
        and previous in _YEAR_PREPOSITIONS
        and tokens[mention.first].tag == "SN"
        and 1900 <= mention.value <= 2999
    ):
        mention.unit, mention.modifier = "year", _YEAR_PREPOSITIONS[previous]
        if free_before and mention.modifier is not None:
            mention.first -= 1
    elif previous in _EXACTLY and free_before:  # "딱 5만원", "정확히 10만 원"
        mention.modifier, mention.first = "eq", mention.first - 1
    if following >= len(tokens) or following in blocked:
        return
    negated = _negated_bound(tokens, following, blocked)
    if negated is not None:  # "10만원 안 되는", "넘지 않는", "못 미치는"
        mention.modifier, mention.last = negated
        return
    after = tokens[following]
    modifier = _NUMBER_MODIFIERS.get(after.form)
    if modifier is None and after.form == "넘" and after.tag.startswith("VV"):
        modifier = "gt"  # "10만 원 넘는"
    if modifier is None and after.form == "까지" and _an_amount_or_age(mention):
        modifier = "lte"  # "10만원까지", "60세까지": up to it (a date's 까지 is a range's end)
    if modifier is None and after.form in ("짜리", "씩") and _an_amount_or_age(mention):
        modifier = "eq"  # "만원짜리 계약", "3만5천원씩 내는": that amount
    if mention.unit == "year" and modifier in _CALENDAR_EDGES:
        modifier = _CALENDAR_EDGES[modifier]  # "2024년 전에": before the year, not years ago
    if modifier is not None:
        if modifier == "during" or mention.modifier is None:
            mention.modifier = modifier
        mention.last = following


def _an_amount_or_age(mention: NumberMention) -> bool:
    return mention.unit in ("won", "age") or (mention.unit is None and mention.value >= 1000)


def _attach_particle_bound(mention: NumberMention, tokens: list[Token], text: str) -> None:
    """Bounds said with a particle Kiwi leaves out of its tokens, read from the text after the
    number: "2027년까지" (up to the end of the year), "2022년보다 앞선" (before it)."""
    if mention.modifier is not None or not text:
        return
    rest = text[tokens[mention.last].end :]
    if rest.startswith("까지") and _an_amount_or_age(mention):
        mention.modifier = "lte"  # "1만5천원까지": up to it
        return
    if mention.unit == "month" and rest.startswith("부터"):
        mention.modifier = "from"  # "3월부터 미납된": from March on
        return
    if mention.unit != "year":
        return
    if rest.startswith("까지"):
        mention.modifier = "until"
        return
    compared = re.match(r"보다\s?(\S+)", rest)
    if compared is None:
        return
    following = mention.last + 1
    for stem, modifier in _COMPARED_YEAR.items():
        if compared.group(1).startswith(stem):
            mention.modifier = modifier
            if _form_at(tokens, following).startswith(stem[:1]):
                mention.last = following  # the verb ("앞서", "늦") belongs to the bound
            return


_COMPARED_YEAR = {"앞": "before", "이른": "before", "이르": "before", "빠른": "before",
                  "전": "before", "늦": "after", "뒤": "after", "나중": "after",
                  "후": "after"}  # fmt: skip
_EXACTLY = frozenset({"딱", "정확히", "꼭", "exactly", "precisely"})
_CALENDAR_EDGES = {"ago": "before", "later": "after"}


def _negated_bound(tokens: list[Token], i: int, blocked: set[int]) -> tuple[str, int] | None:
    """A bound said with a negation after a number, and its last token: 안 되는 / 못 되는 / 못
    미치는 (below it), 안 넘는 / 넘지 않는 / 넘지 못하는 (up to it)."""

    def form(j: int) -> str:
        return tokens[j].form if j < len(tokens) and j not in blocked else ""

    if form(i) in ("안", "못") and form(i + 1) in ("되", "돼", "미치", "미달"):
        return "lt", i + 1
    if form(i) in ("안", "못") and form(i + 1) == "넘":
        return "lte", i + 1
    if form(i) == "넘" and form(i + 1) == "지" and form(i + 2) in ("않", "못"):
        return "lte", i + 2
    return None


def _plausible_name(word: str) -> bool:
    """A surname with a given name: three syllables, or four after a two-syllable surname. An
    unknown two-syllable word ("가진", "정렬") is never taken for a name."""
    if not _HANGUL_NAME.match(word):
        return False
    if len(word) == 3:
        return word[0] in SURNAMES
    return len(word) == 4 and word[:2] in _DOUBLESURNAMES


def _customer_names(
    tokens: list[Token], text: str, features: Features, blocked: set[int], known: frozenset
) -> dict[str, tuple[int, ...]]:
    """Names next to 고객/님/씨 ("신하은 고객", "장우진님", "고객 이은우"), by pattern only, each
    with its tokens."""
    customer_tokens = {
        i for m in features.matches if ("noun", "customer") in m.payloads
        for i in range(m.first, m.last + 1)
    }  # fmt: skip
    honorific_tokens = {
        i for i, t in enumerate(tokens) if t.form in _HONORIFICS and i not in blocked
    }
    by_word: dict[int, list[int]] = {}
    for i, token in enumerate(tokens):
        by_word.setdefault(token.word, []).append(i)
    words = sorted(by_word)
    # A quoted word is a name whatever it looks like ("'이준' 고객").
    quoted = {m.group(1) for m in _QUOTED_NAME.finditer(text)}
    names: dict[str, tuple[int, ...]] = {}
    for position, word in enumerate(words):
        indices = by_word[word]
        # The word is <name><고객|님|씨 ...>: unmatched tokens first, then only customer markers.
        name_part: list[int] = []
        for i in indices:
            if i in blocked or (i in honorific_tokens and name_part):
                break
            name_part.append(i)
        suffix = indices[len(name_part) :]
        if not name_part or any(i not in customer_tokens | honorific_tokens for i in suffix):
            continue
        candidate = text[tokens[name_part[0]].start : tokens[name_part[-1]].end]
        if not _plausible_name(candidate) and candidate not in quoted:
            continue
        if candidate in NOT_NAMES or candidate in known:
            continue
        next_first = by_word[words[position + 1]][0] if position + 1 < len(words) else None
        prev_last = by_word[words[position - 1]][-1] if position > 0 else None
        near_customer = (
            bool(suffix)
            or next_first in customer_tokens
            or next_first in honorific_tokens
            or prev_last in customer_tokens
        )
        if near_customer and candidate not in names:
            names[candidate] = tuple(name_part)
    return names
