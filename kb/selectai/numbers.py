"""Numbers written as words: native Korean (다섯, 스무), Sino-Korean (삼, 십이), English (five).

Digits are handled by the caller; these helpers only turn a single numeral morpheme into an int.
"""

from __future__ import annotations

import re
from decimal import Decimal

# Native Korean numerals, including the shortened forms used before counters (한 명, 두 건, 세 개).
_NATIVE_UNITS = {
    "하나": 1, "한": 1, "둘": 2, "두": 2, "셋": 3, "세": 3, "석": 3, "서": 3,
    "넷": 4, "네": 4, "넉": 4, "너": 4, "다섯": 5, "닷": 5, "여섯": 6, "엿": 6,
    "일곱": 7, "여덟": 8, "아홉": 9,
}  # fmt: skip
_NATIVE_TENS = {
    "열": 10, "스물": 20, "스무": 20, "서른": 30, "마흔": 40, "쉰": 50,
    "예순": 60, "일흔": 70, "여든": 80, "아흔": 90,
}  # fmt: skip

_SINO_DIGITS = {"영": 0, "공": 0, "일": 1, "이": 2, "삼": 3, "사": 4, "오": 5, "육": 6, "륙": 6,
                "칠": 7, "팔": 8, "구": 9}  # fmt: skip
_SINO_SMALL_UNITS = {"십": 10, "백": 100, "천": 1000}
_SINO_LARGE_UNITS = {"만": 10_000, "억": 100_000_000}

_ENGLISH = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "hundred": 100,
}  # fmt: skip

# Multipliers that may follow a number ("10만", "3천", "1억").
MAGNITUDE_WORDS = {"십": 10, "백": 100, "천": 1000, "만": 10_000, "억": 100_000_000}


def native_korean_number(word: str) -> int | None:
    """'열다섯' -> 15, '스무' -> 20, '세' -> 3; None if the word is not a native numeral."""
    if not word:
        return None
    if word in _NATIVE_UNITS:
        return _NATIVE_UNITS[word]
    for tens_word, tens in sorted(_NATIVE_TENS.items(), key=lambda kv: -len(kv[0])):
        if word.startswith(tens_word):
            rest = word[len(tens_word) :]
            if not rest:
                return tens
            unit = _NATIVE_UNITS.get(rest)
            return tens + unit if unit is not None else None
    return None


def sino_korean_number(word: str) -> int | None:
    """'삼' -> 3, '십이' -> 12, '이십오' -> 25, '삼만' -> 30000; None if not Sino-Korean."""
    if not word or any(ch not in _SINO_DIGITS and ch not in _SINO_SMALL_UNITS
                       and ch not in _SINO_LARGE_UNITS for ch in word):  # fmt: skip
        return None
    value = korean_amount([word])  # one grammar of places for a word and for a run of parts
    return int(value) if value is not None else None


def english_number(word: str) -> int | None:
    return _ENGLISH.get(word.lower())


def parse_digits(text: str) -> int | None:
    """'1,000' -> 1000, '05' -> 5; None for anything that is not a plain (comma-grouped) integer."""
    cleaned = text.replace(",", "")
    if not cleaned.isascii() or not cleaned.isdigit() or len(cleaned) > 12:
        return None
    return int(cleaned)


_DIGIT_PART = re.compile(r"\d[\d,]*(?:\.\d+)?")


def korean_amount(parts: list[str]) -> Decimal | None:
    """An amount written in digit and Sino-Korean parts, by place: ["천", "오", "백", "만"] ->
    15,000,000; ["7", "천", "5", "백만"] -> 75,000,000; ["1.2", "억"] -> 120,000,000.

    Each 만/억/조 closes a group of 천/백/십 places, in falling order; a digit may stand before
    a place, never two in a row. None when the parts are not one number."""
    # Decimal, so that 1.1억 is 110,000,000 exactly (a float makes it 110,000,000.00000001).
    total, group = Decimal(0), Decimal(0)
    digit: Decimal | None = None
    last_large: int | None = None
    for part in parts:
        if _DIGIT_PART.fullmatch(part):
            if digit is not None:
                return None
            digit = Decimal(part.replace(",", ""))
            continue
        for ch in part:
            if ch in _SINO_DIGITS:
                if digit is not None:
                    return None
                digit = Decimal(_SINO_DIGITS[ch])
            elif ch in _SINO_SMALL_UNITS:
                group += (1 if digit is None else digit) * _SINO_SMALL_UNITS[ch]
                digit = None
            elif ch in _SINO_LARGE_UNITS or ch == "조":
                large = 10**12 if ch == "조" else _SINO_LARGE_UNITS[ch]
                if last_large is not None and large >= last_large:
                    return None
                total += (group + (digit or 0) or 1) * large
                group, digit, last_large = Decimal(0), None, large
            else:
                return None
    return total + group + (digit or 0)


_ENGLISH_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
    "ninety hundred".split()
)


def english_number_word(word: str) -> bool:
    return word.lower() in _ENGLISH_WORDS


def english_words_value(words: str) -> int | None:
    """'twenty five' -> 25, 'two hundred' -> 200 (text2num's English grammar); None otherwise."""
    from text_to_num import text2num  # a compiled extension: loaded with the first such question

    try:
        return int(text2num(words.replace("-", " "), "en"))
    except ValueError:
        return None
