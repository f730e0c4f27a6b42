"""The tool's engine: a question, asked as one stakeholder, becomes a policy-filtered answer.

Embedded backend (default): the prompt only ever becomes a validated query plan (never SQL),
proposed by the built-in parser or, if configured, a model (kb.selectai.provider); kb.vpd applies
the VPD policy. ORDS backend: the question goes to ORDS Select AI through kb.ords.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured, PermissionDenied
from django.utils import translation

from core.redaction import redact_secrets
from kb.answers import answer_build
from kb.models import Stakeholder
from kb.ords import ords_answer, ords_config
from kb.plans import ENTITIES, MAX_LIMIT, PlanError, plan_parse
from kb.policy import (
    COMPARABLE_MASKS,
    ConditionRefused,
    Mask,
    check_stakeholder_allowed,
    column_mask,
    masked_use,
)
from kb.selectai.parser import help_examples, parse_prompt, question_language
from kb.selectai.provider import ProviderError, propose_plan, provider_config
from kb.selectai.vocabulary import Vocabulary, vocabulary_from_rows
from kb.selectai.wording import DEFAULT_SCOPE, SCOPE_BY_ROLE, refusal_message, summary_counted
from kb.selectors import kb_as_of_date, stakeholder_get, vocabulary_rows
from kb.vpd import execute_plan

log = logging.getLogger(__name__)

__all__ = ["ConditionRefused", "QuestionRefused", "answer_question", "prompt_language", "warm_up"]

EMBEDDED, ORDS = "embedded", "ords"
BUILTIN, OPENAI_COMPATIBLE = "builtin", "openai_compatible"
WARM_UP_PROMPT = "이번 달 미납 보험료"


class QuestionRefused(ConditionRefused):
    """The question asks for data the KB does not hold, or holds words the reader could not use:
    it is not answered as if it were understood. The message quotes those words, says what was
    understood and offers questions the reader answers in full."""

    def __init__(self, message: str, *, reason: str, words: tuple[str, ...]):
        PermissionDenied.__init__(self, message)
        self.message, self.reason, self.words = message, reason, words
        self.field = self.use = None


def answer_question(
    *, stakeholder_id: str, prompt: str, limit: int, delegation_id: int | None = None
) -> dict:
    """Raises kb.policy.PolicyRefused for an unknown, suspended or unknown-role stakeholder (and,
    with the ORDS backend, for ORDS' 401/403) and kb.ords.OrdsError when ORDS fails.

    `delegation_id` is the asking agent's delegation (/mcp); the ORDS backend names it as the
    actor in its assertion. Refusals and plan errors are written in the question's language,
    whatever the server's."""
    with translation.override(prompt_language(prompt)):
        return _answer(
            stakeholder_id=stakeholder_id, prompt=prompt, limit=limit, delegation_id=delegation_id
        )


def prompt_language(prompt: object) -> str:
    """ "ko" for a question with Korean in it, "en" for another; LANGUAGE_CODE for no question."""
    if isinstance(prompt, str) and prompt.strip():
        return question_language(prompt)
    return settings.LANGUAGE_CODE


def _answer(*, stakeholder_id: str, prompt: str, limit: int, delegation_id: int | None) -> dict:
    backend = query_backend()
    stakeholder = stakeholder_get(stakeholder_id)
    check_stakeholder_allowed(stakeholder)
    limit = min(max(int(limit), 1), MAX_LIMIT)
    if backend == ORDS:
        return ords_answer(
            prompt=prompt, limit=limit, stakeholder=stakeholder, delegation_id=delegation_id
        )

    vocabulary = current_vocabulary()
    if plan_provider() == OPENAI_COMPATIBLE and isinstance(prompt, str) and prompt.strip():
        answer = _model_answer(prompt, stakeholder=stakeholder, vocabulary=vocabulary, limit=limit)
        if answer is not None:
            return answer

    parsed = parse_prompt(
        prompt,
        vocabulary=vocabulary,
        as_of=kb_as_of_date(),
        role=stakeholder.role,
        limit=limit,
        stakeholder_id=stakeholder.stakeholder_id,
        branch_id=stakeholder.branch_id,
    )
    interpretation = {**parsed.interpretation, "source": BUILTIN}
    if parsed.refusal is not None:
        # A condition on a masked column is refused as that, whatever else was left unread.
        if parsed.read_plan is not None:
            read = _fit_to_role(parsed.read_plan, stakeholder.role, {})
            _refuse_masked_conditions(read, stakeholder.role, parsed.unexpressed)
        refusal = parsed.refusal
        # The words are quoted back as written: a token pasted into a question is not.
        message = redact_secrets(refusal_message(refusal, parsed.language))
        words = tuple(redact_secrets(word) for word in refusal.words)
        raise QuestionRefused(message, reason=refusal.reason, words=words)
    if parsed.plan is None:
        return _help_answer(stakeholder, limit, {**interpretation, "help": parsed.help})
    plan = _fit_to_role(parsed.plan, stakeholder.role, interpretation)
    _refuse_masked_conditions(plan, stakeholder.role, parsed.unexpressed)
    try:
        answer = execute_plan(plan, stakeholder=stakeholder, interpretation=interpretation)
    except PlanError as exc:
        # E.g. sorting by a column this role sees masked: explain instead of failing the call.
        help_ = {"message": exc.message, "examples": help_examples()}
        return _help_answer(stakeholder, limit, {**interpretation, "help": help_})
    summary = summary_counted(
        interpretation["summary"], answer["row_count"], answer["truncated"], parsed.language
    )
    answer["interpretation"] = {**answer["interpretation"], "summary": summary}
    return answer


def database_roles_checked() -> None:
    """On PostgreSQL, refuse to start (KB_DB_ROLE_CHECK=refuse, production) or log loudly
    (warn) when row-level security would not hold the KB rows."""
    from kb.selectors import kb_database_role_problems

    problems = kb_database_role_problems()
    if not problems:
        return
    if settings.KB_DB_ROLE_CHECK == "refuse":
        raise ImproperlyConfigured("; ".join(problems))
    for problem in problems:
        log.error("KB VPD: %s", problem)


def warm_up() -> None:
    """Check the Select AI settings and load what the first question would wait for (Kiwi takes
    seconds). Reads the database: call it from synchronous start-up code.

    Raises ImproperlyConfigured when a backend or provider setting is unusable.
    """
    started = time.perf_counter()
    database_roles_checked()
    backend = query_backend()
    if backend == ORDS:
        ords_config()  # the URL, the assertions' issuer, audience and key, the exchange
    else:
        if plan_provider() == OPENAI_COMPATIBLE:
            provider_config()
        parse_prompt(
            WARM_UP_PROMPT,
            vocabulary=current_vocabulary(),
            as_of=kb_as_of_date(),
            role="planner",
            limit=1,
        )
    log.info("select ai ready backend=%s in %.1f s", backend, time.perf_counter() - started)


def query_backend() -> str:
    backend = getattr(settings, "KB_QUERY_BACKEND", EMBEDDED) or EMBEDDED
    if backend not in (EMBEDDED, ORDS):
        raise ImproperlyConfigured(f"KB_QUERY_BACKEND must be {EMBEDDED!r} or {ORDS!r}")
    return backend


def plan_provider() -> str:
    provider = getattr(settings, "SELECT_AI_PROVIDER", BUILTIN) or BUILTIN
    if provider not in (BUILTIN, OPENAI_COMPATIBLE):
        raise ImproperlyConfigured(
            f"SELECT_AI_PROVIDER must be {BUILTIN!r} or {OPENAI_COMPATIBLE!r}"
        )
    return provider


_vocabulary: Vocabulary | None = None


def current_vocabulary() -> Vocabulary:
    # Products, branches and people change with a data load, not per request; a restart reloads.
    # An empty catalogue (asked before the data was loaded) is not kept.
    global _vocabulary
    if _vocabulary is not None:
        return _vocabulary
    vocabulary = vocabulary_from_rows(**vocabulary_rows())
    if vocabulary.products:
        _vocabulary = vocabulary
    return vocabulary


def _model_answer(
    prompt: str, *, stakeholder: Stakeholder, vocabulary: Vocabulary, limit: int
) -> dict | None:
    """The answer to the model's plan, or None to fall back to the built-in parser."""
    try:
        plan = propose_plan(
            prompt,
            vocabulary=vocabulary,
            as_of=kb_as_of_date(),
            limit=limit,
            config=provider_config(),
        )
    except ImproperlyConfigured as exc:
        log.error("select ai model not configured, using the built-in parser: %s", exc)
        return None
    except ProviderError as exc:
        log.warning("select ai model gave no plan (%s), using the built-in parser", exc.reason)
        return None
    scope = SCOPE_BY_ROLE.get(stakeholder.role, DEFAULT_SCOPE)
    interpretation = {
        "summary": f"{ENTITIES[plan['entity']].label} 조회 (언어 모델 해석), {scope}",
        "family": "model",
        "scope": scope,
        "entity": plan["entity"],
        "understood": [],
        "source": OPENAI_COMPATIBLE,
    }
    plan = _fit_to_role(plan, stakeholder.role, interpretation)
    try:
        return execute_plan(plan, stakeholder=stakeholder, interpretation=interpretation)
    except PlanError as exc:  # valid in general, not for this role (a masked column)
        log.warning("select ai model plan refused (%s), using the built-in parser", exc.code)
        return None


def _refuse_masked_conditions(plan: dict, role: str, unexpressed: list[str]):
    """Raise ConditionRefused when the question conditions on a column `role` sees masked.

    The data layer refuses such a plan too; this says which condition and why instead of
    answering a different question.
    """
    try:
        parsed = plan_parse(plan)
    except PlanError:
        return  # execute_plan reports the plan's own problem
    used = parsed.referenced_fields()
    used.update(dict.fromkeys(unexpressed, "filter"))
    refused = masked_use(role, plan["entity"], used)
    if refused is not None:
        field, use = refused
        raise ConditionRefused(role=role, entity=plan["entity"], field=field, use=use)
    for related in parsed.related:  # "주민번호가 …인 고객이 없는 …": no way round the mask
        refused = masked_use(role, related.entity, {f.field: "filter" for f in related.filters})
        if refused is not None:
            raise ConditionRefused(role=role, entity=related.entity, field=refused[0], use="filter")


def _fit_to_role(plan: dict, role: str, interpretation: dict) -> dict:
    """Group by customer_id alone when customer_name, only its label, is masked for this role.

    The groups are the same, and the data layer refuses to group by a masked column. Likewise a
    whole-year birth condition ("1987년생") becomes the same condition on age where the role
    sees only the birth year and its ages come from that year.
    """
    plan = _birth_years_as_ages(plan, role)
    group_by = plan.get("group_by") or []
    if "customer_id" not in group_by or "customer_name" not in group_by:
        return plan
    if column_mask(role, plan["entity"], "customer_name") in COMPARABLE_MASKS:
        return plan
    interpretation["notes"] = [
        *interpretation.get("notes", []),
        "이 권한에서는 고객명이 가려져 있어 고객 ID로 묶었습니다.",
    ]
    return {
        **plan,
        "group_by": [name for name in group_by if name != "customer_name"],
        "order_by": [o for o in plan.get("order_by") or [] if o.get("field") != "customer_name"],
    }


def _help_answer(stakeholder: Stakeholder, limit: int, interpretation: dict) -> dict:
    """No rows at all: what was (not) understood and questions that work."""
    return answer_build(
        columns=[],
        rows=[],
        truncated=False,
        limit=limit,
        masked_columns=[],
        as_of=kb_as_of_date(),
        stakeholder_id=stakeholder.stakeholder_id,
        role=stakeholder.role,
        branch_id=stakeholder.branch_id,
        interpretation=interpretation,
    )


def _birth_years_as_ages(plan: dict, role: str) -> dict:
    entity = plan.get("entity")
    if entity not in ENTITIES or "age" not in ENTITIES[entity].fields:
        return plan
    if column_mask(role, entity, "birth_date") is not Mask.YEAR_ONLY:
        return plan
    if column_mask(role, entity, "age") is not Mask.FROM_BIRTH_YEAR:
        return plan
    this_year = kb_as_of_date().year
    filters = []
    for item in plan.get("filters") or []:
        age = _age_condition(item, this_year) if item.get("field") == "birth_date" else None
        filters.append(age or item)
    return {**plan, "filters": filters}


def _age_condition(item: dict, this_year: int) -> dict | None:
    """birth_date on whole years -> the same rows by age = as-of year - birth year; else None."""
    op, value = item.get("op"), item.get("value")
    values = value if isinstance(value, list) else [value]
    if not all(isinstance(v, str) and len(v) == 10 for v in values):
        return None
    years = [int(v[:4]) for v in values]
    starts = [v[5:] == "01-01" for v in values]
    ends = [v[5:] == "12-31" for v in values]
    if op == "between" and len(values) == 2 and starts[0] and ends[1]:
        return {
            "field": "age",
            "op": "between",
            "value": [this_year - years[1], this_year - years[0]],
        }
    if op == "gte" and starts[0]:
        return {"field": "age", "op": "lte", "value": this_year - years[0]}
    if op == "lt" and starts[0]:
        return {"field": "age", "op": "gt", "value": this_year - years[0]}
    if op == "gt" and ends[0]:
        return {"field": "age", "op": "lt", "value": this_year - years[0]}
    if op == "lte" and ends[0]:
        return {"field": "age", "op": "gte", "value": this_year - years[0]}
    return None
