"""The third held-out Select AI set (tests/kb/selectai_heldout3.py), one test per question.

Written before the second reading (kb.proof) and before the reader learnt to read amounts, bounds
and periods by grammar, by people who had not read the reader. Its first run, on the reader as it
stood, was 88 right of 242 (36.4%), 76 wrong and RS(10) -277.7%
(docs/selectai/accuracy-heldout3-first-run.txt); with the second reading added and the reader
unchanged, 90 right, 23 wrong, RS(10) -57.9% (docs/selectai/accuracy-heldout3-with-proof.txt).
After general rules only (never a question's wording) it stands at 225 right, 16 refused and 1
wrong (93.0%, RS(10) 88.8%). The questions that are not right are listed in KNOWN_MISSES with
what they come to instead,
so a change in either direction fails until the table says so. Every answer and every refusal
keeps to the asker's policy.
"""

import pytest

from tests.kb.selectai_heldout import CASES as HELDOUT_CASES
from tests.kb.selectai_heldout2 import CASES as HELDOUT2_CASES
from tests.kb.selectai_heldout3 import CASES, FAMILIES, by_family
from tests.kb.selectai_suite import CASES as SUITE_CASES
from tests.kb.selectai_suite import FLAGGED, REFUSED, RIGHT, SILENT, refusals
from tests.kb.truth import assert_refusal_policy_exact

# case id -> what it comes to instead of RIGHT
KNOWN_MISSES: dict[str, str] = {
    "heldout3-comparisons-10": SILENT,
    "heldout3-periods-14": REFUSED,
    "heldout3-periods-19": REFUSED,
    "heldout3-money_received-15": REFUSED,
    "heldout3-everyday-05": REFUSED,
    "heldout3-everyday-13": REFUSED,
    "heldout3-everyday-22": REFUSED,
    "heldout3-grouping-04": REFUSED,
    "heldout3-grouping-10": REFUSED,
    "heldout3-grouping-22": REFUSED,
    "heldout3-casual_english-18": REFUSED,
    "heldout3-refusals-10": REFUSED,
    "heldout3-mixed-01": REFUSED,
    "heldout3-mixed-02": REFUSED,
    "heldout3-mixed-11": REFUSED,
    "heldout3-mixed-13": REFUSED,
    "heldout3-mixed-21": REFUSED,
}
WRONG = (FLAGGED, SILENT)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_question_comes_out_as_recorded(kb, case):
    outcome, _ = case.outcome()
    assert outcome == KNOWN_MISSES.get(case.id, RIGHT)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_answer_and_refusal_is_policy_exact(kb, case):
    try:
        answer = case.ask()
    except refusals() as exc:
        assert_refusal_policy_exact(exc.message, case.stakeholder_id)
        return
    case.check_policy_exact()
    assert answer["stakeholder"]["id"] == case.stakeholder_id


def test_the_targets_hold():
    """At least 92% right, at most 1% wrong, RS(10) at least 85%; every refusal the set expects
    (data the KB does not hold, a masked column) is a refusal."""
    wrong = [c for c, outcome in KNOWN_MISSES.items() if outcome in WRONG]
    right = len(CASES) - len(KNOWN_MISSES)
    assert right >= 0.92 * len(CASES)
    assert len(wrong) <= 0.01 * len(CASES)
    assert (right - 10 * len(wrong)) / len(CASES) >= 0.85
    expected_refusals = {c.id for c in CASES if c.refusal}
    assert not [c for c in expected_refusals if KNOWN_MISSES.get(c) in WRONG]
    assert set(KNOWN_MISSES.values()) <= {REFUSED, FLAGGED, SILENT}


def test_the_set_is_new_and_spread_over_families():
    assert len(CASES) >= 200
    assert set(by_family()) == set(FAMILIES)
    for family, cases in by_family().items():
        assert len(cases) >= 15, family
    earlier = {c.prompt for c in SUITE_CASES + HELDOUT_CASES + HELDOUT2_CASES}
    assert not [c.id for c in CASES if c.prompt in earlier]
    assert len({c.id for c in CASES}) == len(CASES)
    assert set(KNOWN_MISSES) <= {c.id for c in CASES}
