"""Generalisation measured by a generator, not by lists: questions composed from the classes of
wording (tests/kb/selectai_generator.py), each judged against the plan it was composed from.

A generated question comes out right or refused, never wrong: the reader returns the composed
plan's answer or does not answer. The quick sample runs in `make test-fast`; the full run asks
thousands over several seeds and holds every class to it, and the share answered right to the
target.
"""

from collections import Counter, defaultdict

import pytest

from tests.kb.selectai_generator import REFUSED, RIGHT, WRONG, generate, outcome

QUICK_SEED, QUICK_CASES = 20261203, 150
FULL_SEEDS, FULL_CASES = (1, 2, 3), 1200
TARGET_RIGHT = 0.92


def _run(seed: int, count: int):
    by_class: dict[str, Counter] = defaultdict(Counter)
    wrong = []
    for case in generate(seed, count):
        result, got = outcome(case)
        by_class[case.case_class][result] += 1
        if result == WRONG:
            plan = (got.get("interpretation") or {}).get("plan")
            wrong.append(f"{case.stakeholder_id} {case.prompt!r}: composed {case.plan} read {plan}")
    return by_class, wrong


def test_the_generator_is_seeded_and_spread_over_the_classes():
    first, again = generate(7, 300), generate(7, 300)
    assert [c.prompt for c in first] == [c.prompt for c in again]
    assert len({c.prompt for c in first}) > 250
    classes = {part.split(":")[0] for c in first for part in c.case_class.split("|")[0].split(",")}
    assert {"amount", "age", "year", "status", "period", "grade"} <= classes
    assert {c.shape for c in first} == {"rows", "count", "grouped"}
    assert {c.language for c in first} == {"ko", "en"}


def test_a_quick_sample_is_never_answered_wrong(kb):
    by_class, wrong = _run(QUICK_SEED, QUICK_CASES)
    assert not wrong, "\n".join(wrong)
    totals = sum(by_class.values(), Counter())
    assert totals[RIGHT] >= TARGET_RIGHT * QUICK_CASES, totals


@pytest.mark.slow
@pytest.mark.parametrize("seed", FULL_SEEDS)
def test_thousands_of_generated_questions_are_right_or_refused_in_every_class(kb, seed):
    by_class, wrong = _run(seed, FULL_CASES)
    assert not wrong, f"{len(wrong)} wrong:\n" + "\n".join(wrong[:20])
    totals = sum(by_class.values(), Counter())
    assert totals[RIGHT] + totals[REFUSED] == FULL_CASES
    assert totals[RIGHT] >= TARGET_RIGHT * FULL_CASES, totals
