"""The tool's engine: a question, asked as one stakeholder, becomes a policy-filtered answer.

Embedded backend (default): the prompt only ever becomes a validated query plan (never SQL),
proposed by the built-in parser or, if configured, a model (kb.selectai.provider); kb.vpd applies
the VPD policy. ORDS backend: the question goes to ORDS Select AI through kb.ords.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import translation

from core import tracing
from core.redaction import redact_secrets
from kb import proof, relay
from kb.errors import KbError
from kb.ords import ords_answer, ords_config
from kb.plans import ENTITIES, PlanError, plan_parse
from kb.policy import (
    ConditionRefused,
    StakeholderSnapshot,
    check_stakeholder_allowed,
    outside_scope,
    police,
)
from kb.questions import Question, prompt_language
from kb.selectai.parser import ParseResult, parse_prompt, unreadable_message
from kb.selectai.provider import ProviderError, propose_plan, provider_config
from kb.selectai.vocabulary import Vocabulary, vocabulary_from_rows
from kb.selectai.wording import refusal_message, say, scope_text, suggestions_text
from kb.selectors import kb_as_of_date, stakeholder_get, vocabulary_rows
from kb.vpd import execute

log = logging.getLogger(__name__)

__all__ = [
    "ConditionRefused",
    "Question",
    "QuestionRefused",
    "answer",
    "answer_question",
    "prompt_language",
    "warm_up",
]

EMBEDDED, ORDS = "embedded", "ords"
NOT_UNDERSTOOD = "not_understood"  # a question the reader could not use at all
BUILTIN, OPENAI_COMPATIBLE = "builtin", "openai_compatible"
WARM_UP_PROMPT = "이번 달 미납 보험료"


class QuestionRefused(ConditionRefused):
    """The question asks for data the KB does not hold, or holds words the reader could not use:
    it is not answered as if it were understood. The message quotes those words, says what was
    understood and offers questions the reader answers in full."""

    def __init__(
        self,
        message: str,
        *,
        reason: str,
        words: tuple[str, ...],
        suggestions: tuple[str, ...] = (),
    ):
        KbError.__init__(self, message, reason=reason)
        self.code, self.words, self.suggestions = reason, words, suggestions
        self.field = self.use = None


@tracing.traced("kb.answer")
def answer(
    asker: StakeholderSnapshot | None, question: Question, *, delegation_id: int | None = None
) -> dict:
    """The answer to `question` as `asker` may see it; the asker is taken as given (the /mcp gate
    read it), and kb.vpd checks it again against the stored row as it reads.

    Raises kb.policy.PolicyRefused for an asker who may not query (and, with the ORDS backend,
    for ORDS' 401/403), ConditionRefused (QuestionRefused) for a question refused as asked, and
    kb.ords.OrdsError when ORDS fails: all kb.errors.KbError. `delegation_id` is the asking
    agent's delegation (/mcp); the ORDS backend names it as the actor in its assertion."""
    with translation.override(question.language):
        return _answer(asker, question, delegation_id=delegation_id)


def answer_question(
    *, stakeholder_id: str, prompt: str, limit: int, delegation_id: int | None = None
) -> dict:
    """answer() for a caller that names its stakeholder instead of holding it (the console's
    direct path, management commands): the stakeholder is read here, once."""
    question = Question.asked(prompt, limit)
    with translation.override(question.language):
        asker = StakeholderSnapshot.of(stakeholder_get(stakeholder_id))
    return answer(asker, question, delegation_id=delegation_id)


def _answer(
    asker: StakeholderSnapshot | None, question: Question, *, delegation_id: int | None
) -> dict:
    backend = query_backend()
    check_stakeholder_allowed(asker)
    assert asker is not None  # checked just above
    prompt, limit = question.prompt, question.limit
    if backend == ORDS:
        answered = ords_answer(
            prompt=prompt, limit=limit, stakeholder=asker, delegation_id=delegation_id
        )
        answered["interpretation"].setdefault("language", question.language)
        return answered

    as_of = kb_as_of_date()
    vocabulary = current_vocabulary()
    if plan_provider() == OPENAI_COMPATIBLE and isinstance(prompt, str) and prompt.strip():
        model_answer = _model_answer(question, asker=asker, vocabulary=vocabulary)
        if model_answer is not None:
            return model_answer

    # Here, not on parse_prompt: the start-up warm-up reads a question too, outside any request.
    with tracing.span("kb.read_question"):
        parsed = parse_prompt(
            prompt,
            vocabulary=vocabulary,
            as_of=as_of,
            role=asker.role,
            limit=limit,
            stakeholder_id=asker.stakeholder_id,
            branch_id=asker.branch_id,
        )
    interpretation = {**parsed.interpretation, "source": BUILTIN}
    if parsed.refusal is not None:
        # A condition on a masked column is refused as that, whatever else was left unread.
        if parsed.read_plan is not None:
            _refuse_masked_uses(parsed.read_plan, asker, parsed.unexpressed)
        refusal = parsed.refusal
        # The words are quoted back as written: a token pasted into a question is not.
        message = redact_secrets(refusal_message(refusal, parsed.language))
        words = tuple(redact_secrets(word) for word in refusal.words)
        raise QuestionRefused(
            message, reason=refusal.reason, words=words, suggestions=refusal.suggestions
        )
    if parsed.plan is None:
        raise _unreadable(parsed, question)
    try:
        policed = police(
            plan_parse(parsed.plan), asker, unexpressed=tuple(parsed.unexpressed), as_of=as_of
        )
        # After the policy (a masked column is refused as that, first), before anything runs.
        with tracing.span("kb.proofread"):
            _proofread(prompt, parsed.plan, asker, as_of=as_of, vocabulary=vocabulary)
        answered = execute(policed, interpretation=interpretation)
    except ConditionRefused:
        raise
    except PlanError as exc:
        # A plan this role cannot run: refused, with what it would answer instead.
        raise _unreadable(parsed, question, exc.message) from None
    return relay.told(
        answered,
        asker=asker,
        vocabulary=vocabulary,
        language=question.language,
        outside=outside_scope(parsed.plan, asker),
    )


def _unreadable(parsed: ParseResult, question: Question, why: str = "") -> QuestionRefused:
    """A question the reader could not use at all, refused in its language: an empty success
    would read as "there is no such data"."""
    language = question.language
    message = why or unreadable_message(parsed.unreadable or "parse_failed", language)
    suggestions = tuple((parsed.help or {}).get("examples") or ())[:3]
    if suggestions:
        message = f"{message} {suggestions_text(suggestions, language)}"
    return QuestionRefused(
        redact_secrets(message), reason=NOT_UNDERSTOOD, words=(), suggestions=suggestions
    )


def _proofread(
    prompt: str, plan: dict, asker: StakeholderSnapshot, *, as_of, vocabulary: Vocabulary
) -> None:
    """QuestionRefused (proof_disagrees) unless the second reading of the question agrees with
    the plan: a question the two readings understand differently is never answered. The
    refusal says how the words were read, and offers the question rewritten that way when the
    reader then reads it as the proof-reader does."""
    text = proof.normalise(prompt)
    disagreements = proof.proofread(text, plan, as_of)
    if not disagreements:
        return
    suggestion = proof.rephrased(text, disagreements)
    if suggestion is not None:
        again = parse_prompt(
            suggestion, vocabulary=vocabulary, as_of=as_of, role=asker.role, limit=1,
            stakeholder_id=asker.stakeholder_id, branch_id=asker.branch_id,
        )  # fmt: skip
        if again.plan is None or proof.proofread(suggestion, again.plan, as_of):
            suggestion = None
    language = prompt_language(prompt)
    message = redact_secrets(proof.refusal_message(disagreements, language, suggestion))
    words = tuple(redact_secrets(d.words) for d in disagreements if d.words)
    raise QuestionRefused(message, reason=proof.REASON, words=words)


def _refuse_masked_uses(read_plan: dict, asker: StakeholderSnapshot, unexpressed) -> None:
    """ConditionRefused when the question, as far as it was read, uses a masked column."""
    try:
        police(plan_parse(read_plan), asker, unexpressed=tuple(unexpressed))
    except ConditionRefused:
        raise
    except PlanError:
        return  # the question is refused for its unread words instead


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
    backend = settings.KB_QUERY_BACKEND or EMBEDDED
    if backend not in (EMBEDDED, ORDS):
        raise ImproperlyConfigured(f"KB_QUERY_BACKEND must be {EMBEDDED!r} or {ORDS!r}")
    return backend


def plan_provider() -> str:
    provider = settings.SELECT_AI_PROVIDER or BUILTIN
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
    question: Question, *, asker: StakeholderSnapshot, vocabulary: Vocabulary
) -> dict | None:
    """The answer to the model's plan, or None to fall back to the built-in parser."""
    try:
        plan = propose_plan(
            question.prompt,
            vocabulary=vocabulary,
            as_of=kb_as_of_date(),
            limit=question.limit,
            config=provider_config(),
        )
    except ImproperlyConfigured as exc:
        log.error("select ai model not configured, using the built-in parser: %s", exc)
        return None
    except ProviderError as exc:
        log.warning("select ai model gave no plan (%s), using the built-in parser", exc.reason)
        return None
    if isinstance(plan, dict) and proof.proofread(
        proof.normalise(question.prompt), plan, kb_as_of_date()
    ):
        # The model's plan is held to the same second reading as the reader's.
        log.warning("select ai model plan disagrees with the question, using the built-in parser")
        return None
    entity = ENTITIES[plan["entity"]]
    interpretation = {
        "summary": say(question.language, f"{entity.label} 조회 (언어 모델 해석)",
                       f"{entity.label_en} (read by the language model)"),
        "family": "model",
        "scope": scope_text(asker.role, question.language),
        "entity": plan["entity"],
        "understood": [],
        "source": OPENAI_COMPATIBLE,
    }  # fmt: skip
    try:
        answered = execute(police(plan_parse(plan), asker), interpretation=interpretation)
    except PlanError as exc:  # valid in general, not for this role (a masked column)
        log.warning("select ai model plan refused (%s), using the built-in parser", exc.code)
        return None
    return relay.told(
        answered,
        asker=asker,
        vocabulary=vocabulary,
        language=question.language,
        outside=outside_scope(plan, asker),
    )
