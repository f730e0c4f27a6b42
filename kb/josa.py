"""Korean particles chosen for the word they follow: "계약이", "고객은", "서울로", "5건을".

Written here rather than taken from PyPI: the josa packages there are unmaintained or a few weeks
old, and the rule is one fact about the last syllable (does it end in a consonant, and is that
consonant ㄹ), plus how digits and Latin letters are read aloud.
"""

from __future__ import annotations

# Each particle pair: (after a final consonant, after a vowel).
_PAIRS = {
    "이/가": ("이", "가"),
    "은/는": ("은", "는"),
    "을/를": ("을", "를"),
    "과/와": ("과", "와"),
    "으로/로": ("으로", "로"),
    "이라는/라는": ("이라는", "라는"),
}
_RIEUL = 8  # the final-consonant index of ㄹ
# How a digit is read at the end of a number (0 as in 10, 100, 1000: 십, 백, 천, 만 all end in a
# consonant). Value: the final consonant's index, 0 for none.
_DIGIT_FINALS = {"0": 1, "1": _RIEUL, "2": 0, "3": 16, "4": 0, "5": 0, "6": 1, "7": _RIEUL,
                 "8": _RIEUL, "9": 0}  # fmt: skip
# Latin letters whose English reading ends in a consonant a particle hears (l, m, n, "-ng").
_LATIN_FINALS = {"l": _RIEUL, "m": 16, "n": 4, "g": 21}
_TRAILING = "'\"’”)]}>»」』 .,"


def final_consonant(word: str) -> int | None:
    """The index of the last syllable's final consonant (0 for none), or None for a word with
    nothing to read (empty, or only punctuation)."""
    text = word.rstrip(_TRAILING)
    if not text:
        return None
    last = text[-1]
    code = ord(last) - 0xAC00
    if 0 <= code < 11172:
        return code % 28
    if last in _DIGIT_FINALS:
        return _DIGIT_FINALS[last]
    if last.isascii() and last.isalpha():
        lowered = text.lower()
        if lowered.endswith("ng"):
            return _LATIN_FINALS["g"]
        return 0 if lowered[-1] == "g" else _LATIN_FINALS.get(lowered[-1], 0)
    return 0


def josa(word: str, pair: str) -> str:
    """`word` followed by the particle of `pair` ("이/가", "은/는", "을/를", "과/와", "으로/로")
    that fits it."""
    after_consonant, after_vowel = _PAIRS[pair]
    final = final_consonant(word)
    if final is None:
        return word
    if pair == "으로/로":
        return word + (after_vowel if final in (0, _RIEUL) else after_consonant)
    return word + (after_consonant if final else after_vowel)


def josa_in(language: str | None, word: str, pair: str) -> str:
    """josa() in a Korean message, the word alone in another language: for a translated message
    whose Korean source puts a particle after its placeholder."""
    return josa(word, pair) if (language or "ko").startswith("ko") else word
