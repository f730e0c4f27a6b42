"""The Select AI prompt suite (tests/kb/selectai_suite.py), one test per question.

Each case's truth is computed from the CSV files with plain Python. Cases the parser gets wrong
today are listed in KNOWN_MISSES and xfailed strictly: a fixed case fails until it is removed.
Policy-exactness is checked separately for every answer and is never xfailed.
"""

import pytest

from tests.kb.selectai_suite import CASES, FAMILIES, by_family, params

# case id -> what the parser does instead (from answer["interpretation"]["plan"]).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("case", params(CASES, KNOWN_MISSES))
def test_the_answer_is_what_the_dataset_says(kb, case):
    case.run()


@pytest.mark.parametrize("case", [c for c in CASES if not c.refusal], ids=lambda c: c.id)
def test_every_answer_is_policy_exact(kb, case):
    case.check_policy_exact()


def test_the_suite_is_large_and_spread_over_families_and_roles():
    assert len(CASES) >= 150
    assert set(by_family()) == set(FAMILIES)
    for family, cases in by_family().items():
        assert len(cases) >= 10, family
        askers = {c.stakeholder_id[:4] for c in cases}
        assert askers == {"KB-P", "KB-M", "KB-H"}, (family, askers)
    assert set(KNOWN_MISSES) <= {c.id for c in CASES}
