"""Turn a Korean (or English) question about the KB demo into a structured query plan, or into a
refusal that names the words it could not use.

The question is analysed once (kb.selectai.question); each stage (kb.selectai.stages) returns a
fragment of the plan and the tokens it used; `compose` puts the fragments together and decides
between an answer and a refusal: a word left over that could change the answer (a noun, a number,
a date, a name, a negation, a comparison) means the question is not answered as if it were
understood. The data layer applies the VPD policy to the plan; no SQL is produced here.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

from rapidfuzz import fuzz, process

from kb.catalogue import (
    CONTRACTS,
    CUSTOMERS,
    ENTITIES,
    IN_FORCE_STATUS,
    PAYMENTS,
    TOOL_DEFAULT_LIMIT,
    clamp_limit,
    in_force_by_default,
)

from . import casual, dates
from .lexicon import lexicon_for
from .question import Question, main_language, span
from .related import related_part, related_stages
from .shape import shape_stage
from .stages import (
    CUSTOMER_DETAIL_FIELDS,
    FIELDS,
    IDENTITY_FIELDS,
    Fragment,
    age_stage,
    amount_stage,
    birth_stage,
    entity_stage,
    identity_stage,
    other_stage,
    period_stage,
    personal_text_stage,
    scope_stage,
    status_stage,
    values_stage,
)
from .vocabulary import Vocabulary
from .wording import (
    DIM_FIELDS,
    DIM_LABELS,
    DIM_LABELS_EN,
    HELP_EXAMPLES,
    HELP_EXAMPLES_EN,
    HELP_FOOTER,
    MEASURE_LABELS,
    MEASURE_LABELS_EN,
    UNMAPPABLE_SUMMARY,
    UNREADABLE,
    note_text,
    say,
    scope_text,
    summary_head,
    understood_en,
)

__all__ = [
    "CUSTOMER_DETAIL_FIELDS",
    "FIELDS",
    "IDENTITY_FIELDS",
    "ParseResult",
    "Refusal",
    "help_examples",
    "parse_prompt",
    "main_language",
]

log = logging.getLogger(__name__)

MAX_PROMPT_CHARS = 2000
MAX_WORD_CHARS = 64

_SQL = re.compile(
    r"\bselect\s+(?:\*|distinct\b|count\s*\()|\bselect\b[^;]{0,200}?\bfrom\b[^;]{0,200}?"
    r"(?:\bwhere\b|\bjoin\b|;|=|\blimit\b)|\b(?:drop|truncate|alter)\s+(?:table|database|schema)\b"
    r"|\binsert\s+into\b|\bdelete\s+from\b|\bupdate\s+\w+\s+set\b|\bunion\s+(?:all\s+)?select\b"
    r"|;\s*(?:select|drop|delete|update|insert|alter|grant|truncate)\b|'\s*or\s+'?1'?\s*=\s*'?1"
    r"|\bor\s+1\s*=\s*1\b|--\s*$|/\*|\bexec(?:ute)?\s*\(|\bgrant\s+all\b",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True)
class Refusal:
    """Why a question is not answered: data the KB does not hold (`out_of_data`), or words the
    reader could not use (`unread_words`). Put into words by kb.answering, in the question's
    language."""

    reason: str  # out_of_data | unread_words
    words: tuple[str, ...]  # the question's words, as written
    entity: str | None  # what the question was about, as far as it was understood
    understood: tuple[dict, ...]  # the plan's conditions it did understand
    suggestions: tuple[str, ...]  # questions it would answer, each checked by reading it


@dataclass
class ParseResult:
    """plan: the query plan for the data layer, or None when the question is not answered.
    interpretation: summary/family/scope/understood/ignored (+ notes, period) for the user.
    help: {"message", "examples"} when plan is None; refusal: why, when the question was read
    but cannot be answered as asked; unreadable: why, when it could not be read at all (a key
    of kb.selectai.wording.UNREADABLE)."""

    plan: dict | None
    interpretation: dict
    help: dict | None = None
    unreadable: str | None = None
    unexpressed: list[str] = field(default_factory=list)  # conditions a plan cannot express
    language: str = "ko"  # "en" when the question has no Korean in it
    refusal: Refusal | None = None
    read_plan: dict | None = None  # the plan as far as it was read (for a masked-column check)


class _Unmappable(Exception):
    def __init__(self, key: str, question: Question | None = None):
        super().__init__(key)
        self.key = key  # kb.selectai.wording.UNREADABLE
        self.question = question  # as far as it was read, for suggestions close to it


# ---------------------------------------------------------------------------------------------
# Public entry point


def parse_prompt(
    prompt: str,
    *,
    vocabulary: Vocabulary,
    as_of: dt.date,
    role: str,
    limit: int,
    stakeholder_id: str | None = None,
    branch_id: str | None = None,
) -> ParseResult:
    """Read a question into {entity, fields, filters, group_by, aggregates, order_by, limit}.

    Never raises: anything it cannot map (or any internal error) yields plan=None plus help.
    `role` changes how the scope is phrased, and the asker's id and branch let "다른 설계사"
    mean everyone but the asker; the data layer applies the actual policy.
    """
    language = main_language(prompt if isinstance(prompt, str) else "")
    scope = scope_text(role, language)
    try:
        default_limit = _clamp_limit(limit)
        text = _normalise(prompt)
        if not text:
            raise _Unmappable("no_question")
        if _SQL.search(text):
            raise _Unmappable("no_sql")
        if not isinstance(as_of, dt.date):
            as_of = dt.date.today()
        if isinstance(as_of, dt.datetime):
            as_of = as_of.date()
        corrected: list[tuple[str, str]] = []
        if text.isascii():  # casual English only; a Korean question's Latin words are codes
            text, corrected = casual.expand(text, english_words(vocabulary))
        question = Question(
            text, vocabulary, as_of, default_limit, role if isinstance(role, str) else "",
            stakeholder_id, branch_id,
        )  # fmt: skip
        question.f.corrected.extend(corrected)
        result = compose(question, scope)
        if result.refusal is not None:
            suggestions = _answerable(result.refusal, question, scope)
            result.refusal = Refusal(**{**result.refusal.__dict__, "suggestions": suggestions})
            result.help = {"message": "", "examples": list(suggestions)}
        return result
    except _Unmappable as exc:
        result = _help_result(exc.key, scope, language, prompt)
        if exc.question is not None and result.help is not None:
            nearest = _answerable(
                Refusal("", (), None, (), ()), exc.question, scope, shapes_only=True
            )
            examples = list(dict.fromkeys([*nearest, *result.help["examples"]]))[:3]
            result.help["examples"] = examples
        return result
    except Exception:  # the tool must answer even if a rule above has a bug
        log.exception("selectai parse failed")
        return _help_result("parse_failed", scope, language, prompt)


@lru_cache(maxsize=4)
def english_words(vocabulary: Vocabulary) -> frozenset[str]:
    """The English the reader knows: its phrases' words and its filler (worked out once per
    vocabulary: a question is read on every call)."""
    return lexicon_for(vocabulary).english_words | FUNCTION_WORDS


def help_examples(language: str = "ko") -> list[str]:
    return list(HELP_EXAMPLES_EN if language == "en" else HELP_EXAMPLES)


def unreadable_message(key: str, language: str) -> str:
    """Why a question could not be read at all, and what the reader does understand."""
    return f"{say(language, *UNREADABLE[key])} {say(language, *HELP_FOOTER)}"


def closest_examples(prompt: object, language: str, n: int = 3) -> list[str]:
    """The `n` help examples nearest the question's words (rapidfuzz's token set ratio): a
    question it could not read still gets suggestions about what it asked."""
    examples = help_examples(language)
    if not isinstance(prompt, str) or not prompt.strip():
        return examples[:n]
    ranked = process.extract(
        prompt[:MAX_PROMPT_CHARS], examples, scorer=fuzz.token_set_ratio, limit=len(examples)
    )
    # Stable for equal scores: the examples' own order (the most common questions first).
    ranked.sort(key=lambda hit: (-hit[1], hit[2]))
    return [hit[0] for hit in ranked[:n]]


def _help_result(key: str, scope: str, language: str, prompt: object) -> ParseResult:
    interpretation = {
        "summary": say(language, *UNMAPPABLE_SUMMARY).format(scope=scope),
        "family": "unknown",
        "scope": scope,
        "understood": [],
        "ignored": [],
    }
    help_ = {
        "message": unreadable_message(key, language),
        "examples": closest_examples(prompt, language),
    }
    return ParseResult(
        plan=None, interpretation=interpretation, help=help_, unreadable=key, language=language
    )


def _clamp_limit(limit: object) -> int:
    try:
        value = int(limit)  # type: ignore[call-overload]  # any JSON value: int() refuses the rest
    except (TypeError, ValueError, OverflowError):
        value = TOOL_DEFAULT_LIMIT
    return clamp_limit(value)


def _normalise(prompt: object) -> str:
    if not isinstance(prompt, str):
        return ""
    text = prompt[: MAX_PROMPT_CHARS * 2]
    # NFKC folds full-width digits/letters (５월, ＶＩＰ) into ASCII. Invisible format characters
    # (zero-width, bidi marks) are dropped so "고\u200b객" reads as 고객; other control and
    # separator characters become spaces.
    text = unicodedata.normalize("NFKC", text)
    if not text.isprintable():  # only then is there a control, format or odd space to clean
        text = "".join(_clean_char(ch) for ch in text)
    # Kiwi's cost grows fast with the length of one unbroken word; real words are far shorter.
    text = " ".join(word[:MAX_WORD_CHARS] for word in text.split())
    return text[:MAX_PROMPT_CHARS]


def _clean_char(ch: str) -> str:
    category = unicodedata.category(ch)
    if category == "Cf":
        return ""
    return " " if category[0] in "CZ" else ch


# ---------------------------------------------------------------------------------------------
# Composing the stages


def compose(q: Question, scope: str) -> ParseResult:
    """Run the stages in order, each leaving out the tokens the earlier ones took, and decide:
    an answer when every word that could change it was used, else a refusal naming the rest."""
    absent = {i for _, m in q.f.kinds("absent") for i in span(m)}
    if absent:
        return _refused(q, scope, "out_of_data", absent, None, [])
    if not q.has_domain_signal():
        raise _Unmappable("no_domain", q)

    related = related_part(q)
    whole = q
    if related is not None:
        # The clause about the other rows is read by stages of its own (below).
        q = q.only(set(range(len(q.tokens))) - related.clause - related.words)
    entity, about = entity_stage(q)
    if related is not None:
        entity = related.head
    fragments, period, before_period = _condition_fragments(q, entity, about, scope)
    filters = [x for fragment in fragments for x in fragment.filters]
    shape = shape_stage(q, entity, filters, period.applied, before_period)
    fragments.append(shape.fragment)
    related_plan = []
    if related is not None:
        related_plan = _related_plan(whole, related, fragments)
        q = whole

    plan = {
        "entity": entity,
        "fields": shape.fields,
        "filters": filters,
        "group_by": shape.group_by,
        "aggregates": shape.aggregates,
        "order_by": shape.order_by,
        # The caller's limit is the contract: the question may ask for fewer rows, never more.
        "limit": min(_clamp_limit(shape.limit or q.limit), q.limit),
        **({"related": related_plan} if related_plan else {}),
    }
    fragments.append(_status_convention(q, plan))
    return _decided(q, scope, plan, fragments, shape.family, period.applied)


def _condition_fragments(q: Question, entity: str, about: Fragment, scope: str):
    """The condition stages, in order, each leaving out what the ones before it used; with the
    period they read and the tokens taken before it."""
    fragments: list[Fragment] = []
    used: set[int] = set()  # every token a fragment so far used, or read and could not use

    def add(fragment: Fragment) -> None:
        fragments.append(fragment)
        used.update(fragment.consumed)
        used.update(fragment.unusable)

    add(about)
    add(scope_stage(q))
    add(birth_stage(q, entity))
    add(personal_text_stage(q, entity, frozenset(used)))
    # Whether 만기 means an end date ahead is read from the period before it is used up.
    before_period = frozenset(used)
    period = period_stage(q, entity, before_period)
    add(period.fragment)
    add(identity_stage(q, entity, frozenset(used)))
    add(values_stage(q, entity))
    add(other_stage(q, entity))
    add(status_stage(q, entity, before_period))
    add(age_stage(q, entity, frozenset(used)))
    add(amount_stage(q, entity, frozenset(used)))
    return fragments, period, before_period


def _status_convention(q: Question, plan: dict) -> Fragment:
    """The catalogue's convention: a premium total or ranking over contracts counts in-force
    contracts unless the question names a status or asks for all of them ("모든 상태")."""
    every = {i for _, m in q.f.kinds("all_statuses") for i in span(m)}
    fragment = Fragment(consumed=every)
    has_status = any(x["field"] == "status" for x in plan["filters"])
    if every and has_status:
        fragment.cannot("모든 상태", every)  # every status, and one of them: not both
    elif not every and in_force_by_default(plan) and not has_status:
        plan["filters"].append({"field": "status", "op": "eq", "value": IN_FORCE_STATUS})
        fragment.notes.append("in_force_default")
    return fragment


def _related_plan(whole: Question, related, fragments: list[Fragment]) -> list[dict]:
    """The clause about other rows ("미납이 없는", "계약이 전부 유지 중인") as [NOT] EXISTS."""
    inner = related_stages(whole.only(related.clause), related.entity)
    fragments += [*inner, Fragment(consumed=set(related.words))]
    inner_filters = [x for fragment in inner for x in fragment.filters]
    if related.universal:
        inner_filters = _all_of(inner_filters, fragments[-1], related.words)
    counted = {"at_least": related.at_least} if related.at_least is not None else {}
    return [
        {"entity": related.entity, "filters": inner_filters, "exists": related.exists, **counted}
    ]


def _decided(q: Question, scope: str, plan: dict, fragments: list[Fragment], family, applied):
    """The answer's plan and interpretation, or a refusal naming the words left over."""
    unexpressed = [c for fragment in fragments for c in fragment.unexpressed]
    unusable = set().union(*(f.unusable for f in fragments))
    left_over = leftover_tokens(q, frozenset().union(*(f.consumed for f in fragments)))
    if unusable or left_over.changing:
        result = _refused(
            q, scope, "unread_words", unusable | left_over.changing, plan["entity"],
            plan["filters"],
        )  # fmt: skip
        result.unexpressed = unexpressed
        result.read_plan = plan
        return result

    understood = [u for fragment in fragments for u in fragment.understood]
    notes = [n for fragment in fragments for n in fragment.notes]
    interpretation = _interpretation(q, plan, family, scope, understood, notes, applied)
    interpretation["ignored"] = q.words(left_over.minor)
    return ParseResult(
        plan=plan,
        interpretation=interpretation,
        unexpressed=unexpressed,
        language=main_language(q.text),
    )


_OPPOSITE = {"eq": "ne", "in": "not_in"}


def _all_of(filters: list[dict], fragment: Fragment, words) -> list[dict]:
    """Every related row meets one condition = none meets its opposite; a clause of several
    conditions has no single opposite, so it is not read as if it had."""
    if len(filters) == 1 and filters[0]["op"] in _OPPOSITE:
        return [{**filters[0], "op": _OPPOSITE[filters[0]["op"]]}]
    fragment.cannot("전부", set(words))
    return filters


@dataclass(frozen=True)
class LeftOver:
    changing: frozenset[int]  # tokens that could change the answer: the question is refused
    minor: frozenset[int]  # an adjective or root nothing used: listed in `ignored`


# Kinds a question's meaning rests on: unused, they would change the answer.
CONDITION_KINDS = frozenset({"pay_status", "contract_status", "expire", "product", "category",
                             "branch", "planner", "grade", "gender", "negate", "cmp", "text_op",
                             "time", "birth", "future", "region", "other",
                             "compare", "all_statuses"})  # fmt: skip
# Words worth a refusal when nothing used them: nouns, numbers, foreign words, names.
_CONTENT_TAGS = frozenset({"NNG", "NNP", "NNB", "SL", "SN", "SH", "W_SERIAL", "NR"})
_MINOR_TAGS = frozenset({"XR", "VA"})
# Words that turn a condition around ("안 낸", "없는", "never"): never left over silently.
_NEGATING_FORMS = frozenset({"안", "않", "못", "없", "no", "never", "none", "nobody", "without",
                             "neither", "nor", "non"})  # fmt: skip
# Words that carry no condition ("보여줘", "please show me the").
FUNCTION_WORDS = frozenset(
    "보이 보여주 주 알리 알려주 하 있 되 싶 말하 찾 조회 뽑 출력 구하 확인 궁금 좀 것 거 수 등 "
    "중 경우 번 때 인 데이터 자료 현황 결과 부탁 요청 전체 모든 기준 관련 대하 대한 해당 각 "
    "분 님 씨 들 정리 요약 한번 한 번 다 뭐 뭘 무엇 어떤 어느 누구 누가 얼마 몇 개 건 명 쪽 "
    "부분 내용 상황 목록 리스트 명단 정보 여기 거기 이거 그거 저거 지금 오늘 기준일 전부 "
    "please show me the a an of for with and or in on to is are was were what which who whose "
    "list give get find how do does my all that this by their i want see tell about can could "
    "would you display there have has our any from as at be been it its those these them they "
    "we us me need like just also only pull up fetch bring kindly thanks thank hi hello "
    "currently right now shown showing view let know much many s their 용 염 욤 yet went go "
    "gone come came got been being become insurance there's what's right either 번호 아이디 "
    "관리 나머지 rest remaining 계 계시 already still where but belong belongs whose did so far "
    "pay pays paying"
    "".split()
)


def leftover_tokens(q: Question, consumed: frozenset[int]) -> LeftOver:
    """What no stage used: content words, numbers, names and condition words count; filler,
    particles and verb endings do not."""
    f, tokens = q.f, q.tokens
    changing: set[int] = set()
    minor: set[int] = set()
    condition_tokens = {
        i
        for m in f.matches
        if any(kind in CONDITION_KINDS for kind, _ in m.payloads)
        for i in span(m)
    }
    for number in f.numbers:
        if number.first not in consumed:
            changing |= span(number) - consumed
    for i, token in enumerate(tokens):
        if i in consumed or i in changing:
            continue
        if i in condition_tokens:
            changing.add(i)
        elif i in f.recognised:
            continue  # a shaping word (목록, 보여줘, 지점) read where it mattered, or not needed
        elif token.form in _NEGATING_FORMS and (token.form != "안" or token.tag == "MAG"):
            changing.add(i)
        elif token.tag in _CONTENT_TAGS:
            if token.form in FUNCTION_WORDS or (token.tag == "NNB" and len(token.form) == 1):
                continue
            changing.add(i)
        elif token.tag in _MINOR_TAGS:
            minor.add(i)
    return LeftOver(frozenset(changing), frozenset(minor))


def _refused(q, scope, reason, tokens, entity, filters) -> ParseResult:
    words = tuple(q.words(tokens))
    refusal = Refusal(reason, words, entity, tuple(filters), ())
    language = main_language(q.text)
    interpretation = {
        "summary": say(language, *UNMAPPABLE_SUMMARY).format(scope=scope),
        "family": "refused",
        "scope": scope,
        "understood": [ENTITIES[entity].label_in(language)] if entity else [],
        "ignored": list(words),
    }
    return ParseResult(
        plan=None,
        interpretation=interpretation,
        help={"message": "", "examples": []},
        language=language,
        refusal=refusal,
    )


CONVENTION_NOTES = frozenset({"in_force_default"})


def _interpretation(q, plan, family, scope, understood, notes, applied) -> dict:
    language = main_language(q.text)
    period = dates.describe(applied, with_label=False) if applied else ""
    if language == "en":
        understood = understood_en(plan, q.vocabulary)
    else:
        understood = [ENTITIES[plan["entity"]].label, *understood]
    interpretation = {
        # The figure follows once the plan has run (kb.answering), from the plan that ran.
        "summary": f"{summary_head(plan, family, q.vocabulary, language, period)}, {scope}",
        "family": family,
        "scope": scope,
        "entity": plan["entity"],
        "understood": list(dict.fromkeys(understood)),
        "language": language,
    }
    if period:
        interpretation["period"] = period
    # A convention is said with the statuses an answer covers (kb.relay), from the plan that ran.
    conventions = [n for n in dict.fromkeys(notes) if n in CONVENTION_NOTES]
    notes = [note_text(n, language, scope) for n in dict.fromkeys(notes) if n not in conventions]
    if conventions:
        interpretation["conventions"] = conventions
    if notes:
        interpretation["notes"] = notes
    return interpretation


# ---------------------------------------------------------------------------------------------
# Questions a refusal offers instead


def _answerable(
    refusal: Refusal, question: Question, scope: str, *, shapes_only: bool = False
) -> tuple[str, ...]:
    """Two or three questions built from the catalogue (the entity the question was about, its
    understood conditions, its fields), each kept only if the reader answers it in full."""
    english = main_language(question.text) == "en"
    candidates = _asked_shapes(refusal, question, english)
    if not shapes_only:
        candidates += _candidates(refusal, question.vocabulary, english)
    kept: list[str] = []
    for text in dict.fromkeys(candidates):
        asked = Question(text, question.vocabulary, question.as_of, TOOL_DEFAULT_LIMIT)
        result = compose(asked, scope)
        if result.plan is not None and result.refusal is None:
            kept.append(text)
        if len(kept) == 3:
            break
    return tuple(kept)


def _asked_shapes(refusal: Refusal, question: Question, english: bool) -> list[str]:
    """The nearest answerable shapes of what was asked: the dimensions and measures the question
    names, on the entity it was about ("best-selling products" -> "상품별 계약 수")."""
    dims_said = set(question.f.values("dim"))
    on_contracts = question.f.values("measure") or dims_said & {"product", "category", "status"}
    entity = refusal.entity or (CONTRACTS if on_contracts else CUSTOMERS)
    spec = ENTITIES[entity]
    dims = [d for d in dict.fromkeys(question.f.values("dim")) if d in DIM_FIELDS]
    dims = [d for d in dims if DIM_FIELDS[d][0] in spec.fields and d not in ("customer",)]
    measures = [m for m in dict.fromkeys(question.f.values("measure")) if m in spec.fields]
    out: list[str] = []
    for dim in dims:
        for measure in measures:
            if english:
                out.append(f"total {MEASURE_LABELS_EN[measure]} by {DIM_LABELS_EN[dim]}")
            else:
                out.append(f"{DIM_LABELS[dim]}별 {MEASURE_LABELS[measure]} 합계")
        if english:
            out.append(f"number of {spec.label_en} by {DIM_LABELS_EN[dim]}")
        else:
            out.append(f"{DIM_LABELS[dim]}별 {spec.label} 수")
    return out


def _candidates(refusal: Refusal, vocabulary, english: bool) -> list[str]:
    entities = [refusal.entity] if refusal.entity else []
    entities += [e for e in (CUSTOMERS, CONTRACTS, PAYMENTS) if e not in entities]
    out: list[str] = []
    first = ENTITIES[entities[0]]
    kept = [_condition_words(x, vocabulary, english) for x in refusal.understood]
    kept = [w for w in kept if w]
    noun = first.label_en if english else first.label
    if kept:
        out.append((" ".join(kept) + f" {noun}") if not english else f"{noun} {' '.join(kept)}")
    for name in entities[:2]:
        spec = ENTITIES[name]
        for dim in ("grade", "branch_name", "category", "status"):
            if dim in spec.fields:
                label = spec.fields[dim]
                if english:
                    out.append(f"number of {spec.label_en} by {label.label_en}")
                else:
                    out.append(f"{label.label}별 {spec.label} 수")
                break
        out.append(f"list of {spec.label_en}" if english else f"{spec.label} 목록")
    return out


def _condition_words(item: dict, vocabulary, english: bool) -> str:
    """A condition written back as the words the reader reads it from ("VIP", "강남지점")."""
    fld, op, value = item["field"], item["op"], item["value"]
    if op not in ("eq", "in") or isinstance(value, list):
        return ""
    if fld == "branch_id":
        return "" if english else vocabulary.branches.get(value, "")
    if fld == "product_code":
        product = vocabulary.products.get(value)
        return "" if english or product is None else product.name
    if fld == "gender":
        return (
            ("female" if value == "F" else "male")
            if english
            else ("여성" if value == "F" else "남성")
        )
    if fld in ("grade", "category", "status") and isinstance(value, str):
        return "" if english and main_language(value) == "ko" else value
    return ""
