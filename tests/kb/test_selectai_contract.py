"""Every plan the parser emits must pass the data layer's validator (kb.plans.plan_parse).

No database is touched; the test is skipped if kb.plans cannot be imported (no Django settings).
"""

from __future__ import annotations

import random

import pytest

from kb.selectai.vocabulary import vocabulary_from_csv
from tests.kb.test_selectai_parser import CASES, DATA, parse


@pytest.fixture(scope="module")
def plan_parse():
    try:
        from kb.plans import plan_parse
    except Exception as exc:  # ImproperlyConfigured, or the data layer is not there yet
        pytest.skip(f"kb.plans unavailable: {exc}")
    return plan_parse


def test_parser_plans_pass_the_data_layer_validator(plan_parse):
    vocabulary = vocabulary_from_csv(DATA)
    rng = random.Random(3)
    words = [word for _, prompt, _ in CASES for word in prompt.split()]
    prompts = [prompt for _, prompt, _ in CASES]
    prompts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(500)]
    for prompt in prompts:
        plan = parse(prompt, vocabulary).plan
        if plan is not None:
            plan_parse(plan)  # raises PlanError (with a Korean message) on any mismatch
