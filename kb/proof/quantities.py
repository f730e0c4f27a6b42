"""The proof-reader's own reading of quantities: every number in a question with its unit and the
comparison attached to it, read from the surface text by grammar.

Written apart from the question reader (kb.selectai) on purpose: the two readings must agree
before a plan runs, so this module shares nothing with the reader but the catalogue. It reads
Korean amounts made of digits and unit parts in any mix (천오백만, 3만5천, 1.2억, 150,000),
native and Sino-Korean numerals before a counter (스무 살, 오십만 원), English number words
(text2num) and shorthand (30k, 1.5M), and the comparison or negation before or after each
(이상, 넘지 않는, 안 되는, 밑으로, at least, under, and up, 딱, exactly).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from text_to_num import text2num

# Directions a comparison can take. "up"/"down" say which way; inclusiveness is the reader's.
UP, DOWN, EXACT, BAND = "up", "down", "exact", "band"
AFTER, BEFORE, UNTIL = "after", "before", "until"  # for years and months

# Units a quantity can carry.
WON, AGE, DECADE, COUNT, YEAR, BIRTH_YEAR, DECADE_YEARS, MONTH, DAY, SPAN = (
    "won", "age", "decade", "count", "year", "birth_year", "decade_years", "month", "day", "span"
)  # fmt: skip

_SINO_DIGITS = "영공일이삼사오육칠팔구"
_SINO_VALUE = {ch: i for i, ch in enumerate("영일이삼사오육칠팔구")} | {"공": 0}
_SMALL = {"십": 10, "백": 100, "천": 1000}
_LARGE = {"만": 10_000, "억": 100_000_000, "조": 1_000_000_000_000}
_NATIVE_TENS = {"열": 10, "스물": 20, "스무": 20, "서른": 30, "마흔": 40, "쉰": 50, "예순": 60,
                "일흔": 70, "여든": 80, "아흔": 90}  # fmt: skip
_NATIVE_UNITS = {"하나": 1, "한": 1, "둘": 2, "두": 2, "셋": 3, "세": 3, "넷": 4, "네": 4,
                 "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9}  # fmt: skip

# A run of digits and Sino-Korean numerals with their unit parts ("천오백만", "3만5천", "1.2억");
# runs joined by a space continue an amount ("1억 5천만", "3만 5천").
_RUN = re.compile(r"[\d일이삼사오육칠팔구십백천만억조][\d,.일이삼사오육칠팔구십백천만억조]*")
_PIECES = re.compile(r"\d[\d,]*(?:\.\d+)?|[영공일이삼사오육칠팔구십백천만억조]")
_COUNTER_NEXT = re.compile(r"\s?(?:원|세|살|명|건|개|대|년|월|일|분|곳|가지|개월|달)")
# Dates and ids are not quantities: "2026-06-30", "1987.02.11", "C0001", "KB-P-001".
_NOT_QUANTITY = re.compile(
    r"\d{4}[-./]\d{1,2}(?:[-./]\d{1,2})?|(?<![\w-])(?:[A-Za-z]+-)*[A-Za-z]+-?\d+\b"
)
_NATIVE = re.compile(
    r"(?<![가-힣])((?:열|스물|스무|서른|마흔|쉰|예순|일흔|여든|아흔)?"
    r"(?:하나|한|둘|두|셋|세|넷|네|다섯|여섯|일곱|여덟|아홉)?)\s?(?=살|명|분\b|건|개)"
)
_SHORTHAND = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)\s?(k|K|m|M|mil|million|bn|billion|thousand)(?![a-zA-Z])"
)
_SCALES = {"k": 1_000, "thousand": 1_000, "m": 1_000_000, "mil": 1_000_000,
           "million": 1_000_000, "bn": 10**9, "billion": 10**9}  # fmt: skip
_ENGLISH_WORD_NUMBER = re.compile(
    r"\b((?:(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|"
    r"fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|"
    r"seventy|eighty|ninety|hundred|thousand|million)(?:[\s-](?=[a-z]))?)+)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Quantity:
    """A number as written ("천오백만원 이상"), what it is worth, its unit and its comparison."""

    words: str  # the number and its unit, as written
    value: int
    unit: str | None
    direction: str | None  # UP, DOWN, EXACT, BAND, AFTER, BEFORE, UNTIL, or None
    start: int  # character offsets of `words` in the question
    end: int
    spelled: bool  # written with unit parts or words, not plain digits

    def shown(self, english: bool) -> str:
        """The value as the proof-reader read it: "15,000,000원", "age 60", "2024"."""
        if self.unit == WON:
            return f"{self.value:,} won" if english else f"{self.value:,}원"
        if self.unit == AGE:
            return f"age {self.value}" if english else f"{self.value}세"
        if self.unit == DECADE:
            return f"in their {self.value}s" if english else f"{self.value}대"
        return f"{self.value:,}"


def korean_amount(text: str) -> Decimal | None:
    """'천오백만' -> 15,000,000; '3만5천' -> 35,000; '1.2억' -> 120,000,000; '150,000' -> 150000.

    None when the parts do not make one number (two digits in a row, units out of order)."""
    # Decimal: 1.1억 is 110,000,000 exactly
    total, section = Decimal(0), Decimal(0)
    current: Decimal | None = None
    last_large = None
    pieces = _PIECES.findall(text)
    if "".join(pieces).replace(",", "") != text.replace(",", "").replace(" ", ""):
        return None
    for piece in pieces:
        if piece[0].isdigit() or piece in _SINO_VALUE:
            if current is not None:
                return None
            current = Decimal(piece.replace(",", "") if piece[0].isdigit() else _SINO_VALUE[piece])
        elif piece in _SMALL:
            section += (1 if current is None else current) * _SMALL[piece]
            current = None
        else:
            unit = _LARGE[piece]
            if last_large is not None and unit >= last_large:
                return None
            section += current or 0
            total += (section or 1) * unit
            section, current, last_large = Decimal(0), None, unit
    return total + section + (current or 0)


def _runs(text: str):
    """(start, end) of each amount-like run that can be a number where it stands."""
    position = 0
    while (m := _RUN.search(text, position)) is not None:
        start, end = m.start(), m.end()
        position = end
        while text[end - 1] in "만억조" and (nxt := _RUN.match(text, end + 1)) and text[end] == " ":
            if not re.search(r"[십백천만]", nxt.group(0)):
                break
            end = position = nxt.end()
        number_end = _number_end(text, start, end)
        if number_end is None or (start and re.match(r"[\w.]", text[start - 1])):
            continue
        end = number_end
        yield start, end


def _number_end(text: str, start: int, end: int) -> int | None:
    """Where the number of the run text[start:end] ends: a trailing 이/일/… is a particle or the
    start of a word ("10만이상"), and Hangul numerals alone count only before a counter."""
    while end > start:
        words = text[start:end].rstrip(",.")
        end = start + len(words)
        last = words[-1:]
        counter = _COUNTER_NEXT.match(text, end) is not None
        hangul_only = not any(ch.isdigit() for ch in words)
        if last in _SINO_DIGITS and len(words) > 1 and not (hangul_only and counter):
            end -= 1  # "11일", "10만이상": the last character is a counter or a word's
            continue
        if not any(ch.isdigit() for ch in words) and not counter:
            if last in "만억" and len(words) > 1:
                return end  # "오십만 이상"
            return None
        return end if words else None
    return None


def native_number(word: str) -> int | None:
    """'스무' -> 20, '서른다섯' -> 35, '두' -> 2."""
    word = word.replace(" ", "")
    if not word:
        return None
    tens = next((t for t in sorted(_NATIVE_TENS, key=len, reverse=True) if word.startswith(t)), "")
    rest = word[len(tens) :]
    if rest and rest not in _NATIVE_UNITS:
        return None
    value = _NATIVE_TENS.get(tens, 0) + _NATIVE_UNITS.get(rest, 0)
    return value or None


# -- units after a number ------------------------------------------------------------------------

_UNIT_AFTER = [  # (pattern right after the number, unit); first match wins
    (r"\s?(?:원|₩|won\b|krw\b|KRW\b)", WON),
    (r"년\s?생|년도\s?생", BIRTH_YEAR),
    (r"년대", DECADE_YEARS),
    (r"s\b", DECADE),  # "40s", "1980s": decided by the value below
    (r"\s?(?:세|살)|\s?(?:years?[\s-]old|yrs?[\s-]old|yo)\b", AGE),
    (r"대", DECADE),
    (r"\s?(?:년|years?\b)", YEAR),
    (r"\s?(?:개월|달|months?\b|주일?|weeks?\b)", SPAN),
    (r"\s?(?:월)", MONTH),
    (r"\s?(?:일|days?\b)", DAY),
    (r"\s?(?:명|분|건|개|곳|가지|번|회|people\b|persons?\b|customers?\b|clients?\b|"
     r"contracts?\b|policies\b|payments?\b)", COUNT),
]  # fmt: skip
_UNITS = [(re.compile(pattern), unit) for pattern, unit in _UNIT_AFTER]

# -- comparisons ---------------------------------------------------------------------------------

_PARTICLE = r"(?:\s?(?:이|가|은|는|을|를|의|에|에서|으로|로|쯤|정도|가량|대))?"
_KO_AFTER = [  # (pattern after the quantity and its particle, direction); negations first
    (r"\s?(?:짜리|씩)", EXACT),
    (
        r"\s?(?:이\s?하|미만|밑|아래|안\s?되|안\s?돼|못\s?되|못\s?미치|안\s?넘|이내|안쪽|"
        r"넘지\s?않|넘지\s?못|넘지\s?말|까지|적|낮)",
        DOWN,
    ),
    (r"\s?(?:이\s?상|초과|넘|위로|위\b|웃도|많|부터)", UP),
]
_KO_AFTER_DATE = [
    (r"\s?(?:보다\s?(?:앞|이른|이르|빠른|전))", BEFORE),
    (r"\s?(?:보다\s?(?:늦|뒤|나중|후))", AFTER),
    (r"\s?(?:이\s?후|후|뒤|부터|넘어서|지나서)", AFTER),
    (r"\s?(?:이\s?전|전|앞)", BEFORE),
    (r"\s?(?:까지|이내)", UNTIL),
]
_EN_BEFORE = [  # (pattern ending right before the number, direction); "no more than" first
    (r"(?:no less than|not less than|no fewer than|not fewer than|not under|not below)\s*$", UP),
    (
        r"(?:at most|no more than|not more than|up to|max(?:imum)?(?: of)?|under|below|less than|"
        r"fewer than|lower than|smaller than|younger than|within|not over|not above)\s*$",
        DOWN,
    ),
    (
        r"(?:at least|no less than|not less than|minimum(?: of)?|min\.?|over|above|more than|"
        r"greater than|bigger than|higher than|larger than|older than|exceeding|beyond|upwards of)"
        r"\s*$",
        UP,
    ),
    (r"(?:exactly|precisely|equal to|equals|딱|정확히|꼭|정확하게)\s*$", EXACT),
    (r"(?:최소|적어도)\s*$", UP),
    (r"(?:최대)\s*$", DOWN),
]
_EN_BEFORE_DATE = [
    (r"(?:since|after|from|starting|as of|later than)\s*$", AFTER),
    (r"(?:before|prior to|earlier than|until|till|through|by)\s*$", BEFORE),
]
_EN_AFTER = [
    (
        r"\s?(?:\+|or more|or above|or over|or older|or higher|or greater|and up|and above|"
        r"and over|and older|plus|or later)\b|\s?\+",
        UP,
    ),
    (
        r"\s?(?:or less|or below|or under|or younger|or fewer|or lower|and under|and below|"
        r"and younger|or earlier)\b",
        DOWN,
    ),
]
_KO_AFTER_RE = [(re.compile(_PARTICLE + p), d) for p, d in _KO_AFTER]
_KO_AFTER_DATE_RE = [(re.compile(r"\s?(?:에|의|년)?" + p), d) for p, d in _KO_AFTER_DATE]
_EN_BEFORE_RE = [(re.compile(p, re.IGNORECASE), d) for p, d in _EN_BEFORE]
_EN_BEFORE_DATE_RE = [(re.compile(p, re.IGNORECASE), d) for p, d in _EN_BEFORE_DATE]
_EN_AFTER_RE = [(re.compile(p, re.IGNORECASE), d) for p, d in _EN_AFTER]
_BORN = re.compile(r"born|birth", re.IGNORECASE)
_COUNTED_AFTER = re.compile(r"\s?(?:contracts?|policies|payments?|premiums?)\b", re.IGNORECASE)
_BAND = re.compile(r"\s?대(?![가-힣]*생)")


def quantities(text: str) -> list[Quantity]:
    """Every number of the question, in order, with its unit and comparison."""
    found: list[Quantity] = []
    taken: list[tuple[int, int]] = []

    def free(start: int, end: int) -> bool:
        return all(end <= a or start >= b for a, b in taken)

    for start, end, value, spelled in _numbers(text):
        if not free(start, end):
            continue
        unit, unit_end = _unit(text, end, value)
        if (
            unit == DECADE
            and text[unit_end - 1 : unit_end] == "s"
            and _BORN.search(text[max(0, start - 20) : start])
        ):
            unit, value = DECADE_YEARS, 1900 + value  # "born in the 90s": the 1990s
        direction, words_end = _direction(text, start, unit_end, unit)
        counted = _COUNTED_AFTER.match(text, words_end) and not spelled and value < 1000
        if unit is None and direction in (UP, DOWN) and counted:
            unit = COUNT  # "2 or more contracts" (not "above 100k contracts": an amount)
        found.append(
            Quantity(
                words=text[start:unit_end].strip(),
                value=value,
                unit=unit,
                direction=direction,
                start=start,
                end=max(words_end, unit_end),
                spelled=spelled,
            )
        )
        taken.append((start, unit_end))
    return sorted(found, key=lambda q: q.start)


def _numbers(text: str):
    """(start, end, value, spelled) of each number, longest readings first."""
    for m in _SHORTHAND.finditer(text):
        scale = _SCALES[m.group(2).lower()]
        value = Decimal(m.group(1)) * scale
        if value == int(value):
            yield m.start(), m.end(), int(value), True
    masked = {i for m in _NOT_QUANTITY.finditer(text) for i in range(m.start(), m.end())}
    for start, end in _runs(text):
        if start in masked:
            continue
        words = text[start:end]
        amount = korean_amount(words)
        if amount is None or amount != int(amount):
            continue
        spelled = not re.fullmatch(r"[\d,]+", words)
        yield start, end, int(amount), spelled
    for m in _NATIVE.finditer(text):
        native = native_number(m.group(1))
        if native is not None and m.group(1):
            yield m.start(1), m.end(1), native, True
    for m in _ENGLISH_WORD_NUMBER.finditer(text):
        words = m.group(1).strip(" -")
        try:
            value = text2num(words.lower(), "en")
        except ValueError:
            continue
        yield m.start(1), m.start(1) + len(words), int(value), True


def _unit(text: str, end: int, value: int) -> tuple[str | None, int]:
    for pattern, unit in _UNITS:
        m = pattern.match(text, end)
        if m is None:
            continue
        if unit == DECADE and m.group(0) == "s":
            if 1900 <= value <= 2990 and value % 10 == 0:
                return DECADE_YEARS, m.end()
            if 10 <= value <= 90 and value % 10 == 0:
                return DECADE, m.end()
            continue
        if unit == DECADE and not (10 <= value <= 90 and value % 10 == 0):
            continue
        if unit == YEAR and not 1900 <= value <= 2999 and not (value < 100 and _yy(text, end)):
            return SPAN, m.end()
        if unit == MONTH and not 1 <= value <= 12:
            continue
        if unit == COUNT and value >= 1000:
            continue  # "above 100k contracts": an amount before the noun, not a count of them
        if unit == DAY and not 1 <= value <= 31:
            continue
        return unit, m.end()
    before = text[max(0, end - 40) : end - len(str(value))]
    if 1900 <= value <= 2999 and _YEAR_PREPOSITION.search(before):
        return YEAR, end  # "before 2024", "since 2025", "between 2019 and 2021"
    return None, end


_YEAR_PREPOSITION = re.compile(
    r"\b(?:in|since|before|after|from|until|till|between|and|of|during|by|to|through|"
    r"prior to|later than|earlier than)\s+$",
    re.IGNORECASE,
)


def _yy(text: str, end: int) -> bool:
    """'87년생': a two-digit year of birth."""
    return bool(re.match(r"\s?년\s?생", text[end:]))


def _direction(text: str, start: int, end: int, unit: str | None) -> tuple[str | None, int]:
    """The comparison written with the quantity, and where its words end."""
    dated = unit in (YEAR, BIRTH_YEAR, DECADE_YEARS, MONTH)
    if unit == WON or unit is None:
        band = _BAND.match(text, end)
        if band and unit == WON:
            return BAND, band.end()
    after = _KO_AFTER_DATE_RE if dated else _KO_AFTER_RE
    for pattern, direction in after:
        m = pattern.match(text, end)
        if m:
            return direction, m.end()
    for pattern, direction in _EN_AFTER_RE:
        m = pattern.match(text, end)
        if m:
            return (AFTER if dated and direction == UP else direction), m.end()
    before = text[max(0, start - 24) : start]
    for pattern, direction in (_EN_BEFORE_DATE_RE if dated else []) + _EN_BEFORE_RE:
        if pattern.search(before):
            return direction, end
    return None, end
