"""Casual English, read as what it stands for: texting abbreviations ("pls", "r", "b4", "ppl")
and misspelt words ("custmers", "premuim", "unpayed") corrected to the reader's own English
vocabulary, only when one word of it is clearly the closest (rapidfuzz's edit distance).

Each correction is kept, so the answer says how it read the word ("'custmers' read as
'customers'"); a word with no clear nearest stays as written and is refused if it matters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

# Texting shorthand -> the words the reader knows.
ABBREVIATIONS = {
    "pls": "please", "plz": "please", "thx": "thanks", "r": "are", "u": "you", "ur": "your",
    "yr": "year", "yrs": "years", "b4": "before", "hw": "how", "ppl": "people", "w/": "with",
    "avg": "average", "amt": "amount", "mo": "month", "mos": "months", "cust": "customers",
    "custs": "customers", "prem": "premium", "whos": "who is", "wat": "what", "wht": "what",
}  # fmt: skip
_WORD = re.compile(r"(?<![\w/'’])([A-Za-z][A-Za-z0-9]*/?)(?![\w'’])")


def expand(text: str, vocabulary: Iterable[str]) -> tuple[str, list[tuple[str, str]]]:
    """The text with abbreviations and clear typos replaced, and (as written, read as) pairs."""
    if not text.isascii():
        return text, []  # a Korean question's Latin words are ids, products and codes
    known = _known(frozenset(vocabulary))
    corrections: list[tuple[str, str]] = []

    def replace(m: re.Match) -> str:
        word = m.group(1)
        lower = word.lower()
        if lower in ABBREVIATIONS:
            read: str | None = ABBREVIATIONS[lower]
        elif lower in known or len(lower) < 5 or not lower.isalpha():
            return word
        else:
            read = _nearest(lower, known)
        if read is None:
            return word
        corrections.append((word, read))
        return read

    return _WORD.sub(replace, text), corrections


@lru_cache(maxsize=4)
def _known(vocabulary: frozenset[str]) -> tuple[str, ...]:
    words = {w for phrase in vocabulary for w in phrase.split() if w.isascii() and w.isalpha()}
    return tuple(sorted(words))


def _nearest(word: str, known: tuple[str, ...]) -> str | None:
    """The one known word within an edit or two (two for words of seven letters and more),
    with no other as close; None when none is, or two are."""
    limit = 2 if len(word) >= 7 else 1
    found = process.extract(word, known, scorer=Levenshtein.distance, limit=2)
    close = [(choice, distance) for choice, distance, _ in found if distance <= limit]
    if not close or (len(close) > 1 and close[0][1] == close[1][1]):
        return None
    return close[0][0]
