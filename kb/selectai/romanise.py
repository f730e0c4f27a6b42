"""Hangul -> Revised Romanization, for reading place names written in Latin letters ("Jongno",
"Haeundae", "Dunsan").

Written here rather than taken from PyPI: the romanisers there are unmaintained, and the few
branch and region names of the KB need only the syllable tables plus the two sound changes that
occur in them (ㄹ after ㄴ/ㅁ/ㅇ, and ㄴ before ㄹ).
"""

from __future__ import annotations

_INITIALS = ["g", "kk", "n", "d", "tt", "r", "m", "b", "pp", "s", "ss", "", "j", "jj", "ch", "k",
             "t", "p", "h"]  # fmt: skip
_MEDIALS = ["a", "ae", "ya", "yae", "eo", "e", "yeo", "ye", "o", "wa", "wae", "oe", "yo", "u",
            "wo", "we", "wi", "yu", "eu", "ui", "i"]  # fmt: skip
_FINALS = ["", "k", "k", "k", "n", "n", "n", "t", "l", "k", "m", "l", "l", "l", "p", "l", "m", "p",
           "p", "t", "t", "ng", "t", "t", "k", "t", "p", "t"]  # fmt: skip
_RIEUL, _NIEUN = 5, 2  # initial indices
_FINAL_N, _FINAL_L, _FINAL_M, _FINAL_NG = 4, 8, 16, 21


def romanise(text: str) -> str:
    """'종로' -> 'jongno', '해운대' -> 'haeundae'; other characters are kept, lowercased."""
    syllables: list[list[int] | str] = []  # (initial, medial, final) jamo indexes, or the character
    for ch in text:
        code = ord(ch) - 0xAC00
        if 0 <= code < 11172:
            syllables.append([code // 588, (code // 28) % 21, code % 28])
        else:
            syllables.append(ch.lower())
    out = []
    for i, syllable in enumerate(syllables):
        if isinstance(syllable, str):
            out.append(syllable)
            continue
        initial, medial, final = syllable
        previous = syllables[i - 1] if i and not isinstance(syllables[i - 1], str) else None
        following = syllables[i + 1] if i + 1 < len(syllables) else None
        following = None if isinstance(following, str) else following
        lead = _INITIALS[initial]
        if previous and initial == _RIEUL:
            if previous[2] in (_FINAL_M, _FINAL_NG):
                lead = "n"  # 종로 -> jongno
            elif previous[2] in (_FINAL_N, _FINAL_L):
                lead = "l"  # 신라 -> silla (with the final below)
        elif previous and initial == _NIEUN and previous[2] == _FINAL_L:
            lead = "l"  # 설날 -> seollal
        tail = _FINALS[final]
        if following and final == _FINAL_N and following[0] == _RIEUL:
            tail = "l"  # 신라 -> silla
        out.append(lead + _MEDIALS[medial] + tail)
    return "".join(out)
