"""Every question of the project's own sets, read as an agent would relay its answer: never a
success with nothing in it, the asker's language in every word that is not data, no template
artefact ("이(가)", "항목 birth_date"), and a text content that starts with the sentence.

The sets are the suite and the three held-out sets (tests.kb.selectai_*): about 800 questions in
Korean and English, as planners, branch managers and analysts.
"""

from __future__ import annotations

import re

import pytest

from kb.questions import prompt_language
from kb.relay import answer_text
from tests.kb.selectai_heldout import CASES as HELDOUT_CASES
from tests.kb.selectai_heldout2 import CASES as HELDOUT2_CASES
from tests.kb.selectai_heldout3 import CASES as HELDOUT3_CASES
from tests.kb.selectai_suite import CASES as SUITE_CASES
from tests.kb.selectai_suite import refusals
from tests.kb.truth import BRANCHES, CUSTOMERS, PEOPLE, PRODUCTS

SETS = {
    "suite": SUITE_CASES,
    "heldout": HELDOUT_CASES,
    "heldout2": HELDOUT2_CASES,
    "heldout3": HELDOUT3_CASES,
}
HANGUL = re.compile(r"[가-힣]+")
ARTEFACT = re.compile(r"\((?:이|가|을|를|은|는|으|과|와)\)|\b[a-z]+_[a-z_]+\b")
# Korean that is data, not wording: names, products, branches, coded values as stored.
DATA_WORDS = sorted(
    {c["customer_name"] for c in CUSTOMERS.values()}
    | {p["name"] for p in PEOPLE.values()}
    | {p["product_name"] for p in PRODUCTS.values()}
    | {p["category"] for p in PRODUCTS.values()}
    | {b["branch_name"] for b in BRANCHES.values()}
    | {b["region"] for b in BRANCHES.values()}
    | {"유지", "해지", "실효", "만기", "납입", "미납", "일반"},
    key=len,
    reverse=True,
)
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def wording(text: str, prompt: str) -> str:
    """`text` without its data and without the question's own words quoted back."""
    text = QUOTED.sub(" ", text)
    for word in DATA_WORDS:
        text = text.replace(word, " ")
    for word in HANGUL.findall(prompt):
        text = text.replace(word, " ")
    return re.sub(r"\d+대", " ", text)  # an age band as stored ("30대 (30s)")


def relay_problems(case) -> list[str]:
    english = prompt_language(case.prompt) == "en"
    try:
        answer = case.ask()
    except refusals() as exc:
        if english and HANGUL.search(wording(exc.message, case.prompt)):
            return [f"{case.id}: an English question refused in Korean: {exc.message}"]
        return []
    problems = []
    interpretation = answer["interpretation"]
    summary = interpretation["summary"]
    said = [summary, *interpretation.get("notes", []), *interpretation.get("understood", [])]
    said += [c["label"] for c in answer["columns"]]
    if not answer["columns"]:
        problems.append(f"{case.id}: a success with no columns")
    if any(ARTEFACT.search(text) for text in said):
        problems.append(f"{case.id}: a template artefact in {said}")
    if english and any(HANGUL.search(wording(text, case.prompt)) for text in said):
        problems.append(f"{case.id}: an English question answered in Korean: {said}")
    if not english and not HANGUL.search(summary):
        problems.append(f"{case.id}: a Korean question answered in English: {summary}")
    if not answer_text(answer).startswith(summary):
        problems.append(f"{case.id}: the text does not start with the sentence")
    return problems


# The suite in make test-fast; the held-out sets (about 570 questions) in the full run.
@pytest.mark.parametrize(
    "name",
    [name if name == "suite" else pytest.param(name, marks=pytest.mark.slow) for name in SETS],
)
def test_every_answer_of_a_set_relays_as_it_is(kb, name):
    problems = [p for case in SETS[name] for p in relay_problems(case)]
    assert not problems, "\n".join(problems[:20])


def test_the_check_can_fail():
    """What the set test flags, on answers built to be wrong."""
    assert ARTEFACT.search("KB암보험 계약이(가) 있는 고객")
    assert ARTEFACT.search("항목 birth_date")
    assert HANGUL.search(wording("Customers (grade VIP): 16 고객", "list VIP customers"))
    assert not HANGUL.search(wording("Customers (branch 강남지점): 3", "customers of 강남지점"))
    assert not HANGUL.search(wording("status 미납 (unpaid)", "unpaid"))
