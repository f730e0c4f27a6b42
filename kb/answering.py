"""The tool's engine: a question, asked as one stakeholder, becomes a policy-filtered answer.

The prompt only ever becomes a validated query plan (never SQL); kb.vpd applies the VPD policy.
"""

from functools import lru_cache

from kb.answers import answer_build
from kb.policy import check_stakeholder_allowed
from kb.selectai.parser import parse_prompt
from kb.selectai.vocabulary import Vocabulary, vocabulary_from_rows
from kb.selectors import kb_as_of_date, stakeholder_get, vocabulary_rows
from kb.vpd import execute_plan


def answer_question(*, stakeholder_id: str, prompt: str, limit: int) -> dict:
    """Raises kb.policy.PolicyRefused for an unknown, suspended or unknown-role stakeholder."""
    stakeholder = stakeholder_get(stakeholder_id)
    check_stakeholder_allowed(stakeholder)
    as_of = kb_as_of_date()
    parsed = parse_prompt(
        prompt, vocabulary=current_vocabulary(), as_of=as_of, role=stakeholder.role, limit=limit
    )
    if parsed.plan is None:
        # Nothing understood: say so and suggest questions, with no rows at all.
        return answer_build(
            columns=[],
            rows=[],
            truncated=False,
            limit=limit,
            masked_columns=[],
            as_of=as_of,
            stakeholder_id=stakeholder.stakeholder_id,
            role=stakeholder.role,
            branch_id=stakeholder.branch_id,
            interpretation={**parsed.interpretation, "help": parsed.help},
        )
    return execute_plan(parsed.plan, stakeholder=stakeholder, interpretation=parsed.interpretation)


@lru_cache(maxsize=1)
def current_vocabulary() -> Vocabulary:
    # Products, branches and people change with a data load, not per request; a restart reloads.
    return vocabulary_from_rows(**vocabulary_rows())
