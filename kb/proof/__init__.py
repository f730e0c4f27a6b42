"""The proof-reader: a second, independent reading of a question that must agree with the plan
before the plan runs.

It reads the question's surface again, by its own grammar (kb.proof.quantities,
kb.proof.periods, kb.proof.words), and extracts every quantity with its unit and comparison,
every period, every grouping, every status and named customer. `proofread` checks that the plan
carries each with the same value and direction, and carries nothing the question did not ask
(no invented window, amount, age, status or name). Any disagreement means the question is not
answered: kb.answering refuses it (reason `proof_disagrees`), saying how the words were read.

It shares nothing with the question reader (kb.selectai) but the catalogue (kb.catalogue); an
import-linter contract holds the two apart, so one reading's mistake cannot become the other's.
"""

from __future__ import annotations

import datetime as dt
import unicodedata

from . import check
from .check import Disagreement
from .quantities import quantities

__all__ = ["REASON", "Disagreement", "explain", "normalise", "proofread", "refusal_message",
           "rephrased"]  # fmt: skip

REASON = "proof_disagrees"  # the refusal's reason, as the audit records it


def normalise(prompt: object) -> str:
    """The question as both readings see it: NFKC-folded (５만 is 5만), invisible format
    characters dropped, runs of spaces made one."""
    if not isinstance(prompt, str):
        return ""
    text = unicodedata.normalize("NFKC", prompt)
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return " ".join(text.split())


def proofread(text: str, plan: dict, as_of: dt.date) -> list[Disagreement]:
    """What the plan does not carry as the question says it, or carries unasked; [] = agreed."""
    numbers = quantities(text)
    found = [
        *check.money(text, plan, numbers),
        *check.ages(text, plan, numbers),
        *check.times(text, plan, numbers, as_of),
        *check.grouping(text, plan),
        *check.aggregates(text, plan),
        *check.related_counts(text, plan, numbers),
        *check.statuses(text, plan),
        *check.names(text, plan),
    ]
    return list(dict.fromkeys(found))


def rephrased(text: str, disagreements: list[Disagreement]) -> str | None:
    """The question with each misread quantity written the way both readings read it, or None
    when there is nothing to rewrite."""
    rewrites = [d for d in disagreements if d.rewrite and d.span]
    if not rewrites:
        return None
    out = text
    for d in sorted(rewrites, key=lambda d: d.span[0], reverse=True):  # type: ignore[index]
        start, end = d.span  # type: ignore[misc]
        out = out[:start] + str(d.rewrite) + out[end:]
    return out


def explain(disagreements: list[Disagreement], language: str) -> str:
    """How the proof-reader read the words the plan does not carry, joined for a message."""
    english = language == "en"
    return "; ".join(d.read_en if english else d.read_ko for d in disagreements)


_MESSAGE = {
    "ko": "질문을 두 번 읽은 뜻이 서로 달라 답하지 않았습니다: {read}.",
    "en": "Not answered: two readings of the question disagree: {read}.",
}
_SUGGEST = {
    "ko": ' 이렇게 물어보면 답할 수 있습니다: "{suggestion}".',
    "en": ' Ask it this way and it is answered: "{suggestion}".',
}
_REPHRASE = {
    "ko": " 금액은 숫자로(예: 15,000,000원 이상), 기간은 날짜로(예: 2024-01-01 이전) 적어 주세요.",
    "en": " Write amounts in digits (e.g. at least 15,000,000 won) and periods as dates "
    "(e.g. before 2024-01-01).",
}


def refusal_message(
    disagreements: list[Disagreement], language: str, suggestion: str | None
) -> str:
    language = "en" if language == "en" else "ko"
    message = _MESSAGE[language].format(read=explain(disagreements, language))
    if suggestion:
        return message + _SUGGEST[language].format(suggestion=suggestion)
    return message + _REPHRASE[language]
