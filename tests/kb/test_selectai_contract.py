"""Every plan the parser emits must pass the data layer's validator (kb.plans.plan_parse).

No database is touched."""

from __future__ import annotations

import random

from kb.plans import plan_parse
from kb.selectai.vocabulary import vocabulary_from_csv
from tests.kb.test_selectai_parser import CASES, DATA, parse


def test_parser_plans_pass_the_data_layer_validator():
    vocabulary = vocabulary_from_csv(DATA)
    rng = random.Random(3)
    words = [word for _, prompt, _ in CASES for word in prompt.split()]
    prompts = [prompt for _, prompt, _ in CASES]
    prompts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) for _ in range(500)]
    for prompt in prompts:
        plan = parse(prompt, vocabulary).plan
        if plan is not None:
            plan_parse(plan)  # raises PlanError (with a Korean message) on any mismatch
