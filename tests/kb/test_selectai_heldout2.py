"""The second held-out Select AI set (tests/kb/selectai_heldout2.py), one test per question.

Written before the reader was changed against it, by people who had not read the reader. Each
question must come out right; the few that do not are listed in KNOWN_MISSES with what they come
to instead (a named refusal, a flagged answer or a silent one), so a change in either direction
fails until the table says so. Every answer and every refusal keeps to the asker's policy.
"""

import pytest

from tests.kb.selectai_heldout import CASES as HELDOUT_CASES
from tests.kb.selectai_heldout2 import CASES, FAMILIES, by_family
from tests.kb.selectai_suite import CASES as SUITE_CASES
from tests.kb.selectai_suite import FLAGGED, REFUSED, RIGHT, SILENT, refusals
from tests.kb.truth import assert_refusal_policy_exact

# case id -> what it comes to instead of RIGHT
KNOWN_MISSES: dict[str, str] = {
    "heldout2-ranges-10": SILENT,
    "heldout2-ranges-11": SILENT,
    "heldout2-shape-12": REFUSED,
    "heldout2-everyday-06": SILENT,
}


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
    wrong_and_silent = [c for c, outcome in KNOWN_MISSES.items() if outcome == SILENT]
    assert len(CASES) - len(KNOWN_MISSES) >= 0.92 * len(CASES)
    assert len(wrong_and_silent) <= 0.02 * len(CASES)
    assert not [c for c in KNOWN_MISSES if c.startswith("heldout2-out_of_data-")]
    assert set(KNOWN_MISSES.values()) <= {REFUSED, FLAGGED, SILENT}


def test_the_set_is_new_and_spread_over_families():
    assert len(CASES) >= 200
    assert set(by_family()) == set(FAMILIES)
    for family, cases in by_family().items():
        assert len(cases) >= 10, family
    earlier = {c.prompt for c in SUITE_CASES} | {c.prompt for c in HELDOUT_CASES}
    assert not [c.id for c in CASES if c.prompt in earlier]
    assert len({c.id for c in CASES}) == len(CASES)
    assert set(KNOWN_MISSES) <= {c.id for c in CASES}
