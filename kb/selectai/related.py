"""The reader's related-rows stage: a clause about a customer's (or a contract's) other rows,
which must exist ("유지 계약이 있는 고객") or must not ("미납이 없는 고객"), read by stages of its
own."""

from __future__ import annotations

from dataclasses import dataclass

from kb.catalogue import CONTRACTS, CUSTOMERS, PAYMENTS

from .question import Question, question_language, span
from .stages import Fragment, amount_stage, period_stage, status_stage, values_stage


@dataclass(frozen=True)
class RelatedPart:
    """A clause about a customer's (or a contract's) other rows: which entity, whether such rows
    must exist, the clause's tokens (read by the related rows' stages) and the words saying so."""

    head: str  # the entity answered: customers or contracts
    entity: str  # the related rows' entity
    exists: bool
    clause: frozenset[int]
    words: frozenset[int]
    universal: bool = False  # "계약이 전부 유지 중인": no related row fails the clause
    at_least: int | None = None  # "계약이 2건 이상인": at least this many related rows


_NEGATIVE = {"없": "VA", "않": "VX", "안": "MAG", "못": "MAG"}
_POSITIVE = {"있": "V", "가지": "VV", "갖": "VV", "보유": "NNG"}
_NEGATIVE_EN = frozenset({"no", "never", "without", "none"})
_POSITIVE_EN = frozenset({"with", "having", "have", "has", "holding", "hold", "own", "owns"})
_EMPHASIS = frozenset(
    {"전혀", "하나", "번", "단", "한", "이력", "any", "ever", "a", "an", "single"}
)
# What a clause's words say about which rows they describe.
_PAYMENT_KINDS = frozenset({"pay_status"})
_CONTRACT_KINDS = frozenset({"contract_status", "product", "category", "expire", "sold"})
_CLAUSE_KINDS = _PAYMENT_KINDS | _CONTRACT_KINDS
_CLAUSE_KINDS |= {"time", "recent", "future", "new", "noun", "measure", "history", "negate", "cmp"}
RELATED_HEADS = {"customer": CUSTOMERS, "contract": CONTRACTS}


_CUE_FORMS = frozenset(_NEGATIVE) | frozenset(_POSITIVE) | _NEGATIVE_EN | _POSITIVE_EN


def related_part(q: Question) -> RelatedPart | None:
    f = q.f
    counted = _count_cue(q)
    maybe = (
        counted is not None
        or f.has("all")
        or (f.has("pay_status") and f.has("noun", "contract"))
        or (f.has("new") and (f.has("product") or f.has("category")))
        or any(m.text.lower() == "without" for _, m in f.kinds("negate"))
        or any(t.form in _CUE_FORMS for i, t in enumerate(q.tokens) if i not in f.recognised)
    )
    if not maybe:
        return None  # nothing says rows exist or not: the common case, decided at once
    english = question_language(q.text) == "en"
    cue = counted[:3] if counted is not None else _existence_cue(q, english)
    universal = False
    if cue is None and not english:
        cue, universal = _universal_cue(q), True
    if cue is None and not english:
        cue, universal = _implicit_cue(q), False
    if cue is None:
        return None
    at, exists, cue_words = cue
    heads = [(m, v) for v, m in q.f.kinds("noun") if v in RELATED_HEADS]
    if english:
        before = [(m, v) for m, v in heads if m.last < at]
        head = before[0] if before else None
        region = set(range(at + 1, len(q.tokens)))
    else:
        after = [(m, v) for m, v in heads if m.first >= at]
        among = [(m, v) for m, v in heads if m.last < at and _form(q, m.last + 1) == "중"]
        # "어르신 중 … 계약 2건 이상인 분": the rows answered are named before 중
        head = after[-1] if after else (among[-1] if among else None)
        # "작년에 가입한 고객 중 계약 2건 이상인 사람": the clause starts after the answered rows
        named = [m.last for m, v in heads if m.last < at and v == (head[1] if head else None)]
        region = set(range(max(named) + 1 if named else 0, at))
    if head is None:
        return None
    head_entity = RELATED_HEADS[head[1]]
    kinds = {
        k for m in q.f.matches if span(m) <= region for k, v in m.payloads
        if k in _CLAUSE_KINDS and not (k == "noun" and v == "customer")
    }  # fmt: skip
    nouns = {v for v, m in q.f.kinds("noun") if span(m) <= region}
    if kinds & _PAYMENT_KINDS or nouns & {"payment", "premium"}:
        entity = PAYMENTS
    elif kinds & _CONTRACT_KINDS or "contract" in nouns or q.f.values("measure"):
        entity = CONTRACTS
    else:
        return None
    if entity == head_entity or (head_entity, entity) not in _RELATED_LINKS:
        return None
    if exists and "가입" in {q.tokens[i].form for i in cue_words}:
        if not kinds & {"product", "category"}:  # "가입한 고객" is when they joined
            return None
    clause, words = _clause_and_cue_words(q, region, cue_words)
    at_least = counted[3] if counted is not None else None
    return RelatedPart(head_entity, entity, exists, clause, words, universal, at_least)


def _form(q: Question, i: int) -> str:
    return q.tokens[i].form if 0 <= i < len(q.tokens) else ""


def _clause_and_cue_words(q: Question, region: set[int], cue_words) -> tuple[frozenset, frozenset]:
    """The tokens of the clause about the other rows, and the words that only say they exist
    (the cue, its emphasis, "한 건도")."""
    clause = {
        i for m in q.f.matches if span(m) <= region
        if any(k in _CLAUSE_KINDS for k, _ in m.payloads)
        and not any(k == "noun" and v == "customer" for k, v in m.payloads)
        for i in span(m)
    }  # fmt: skip
    # "한 번도", "1건도" only stress that none exists; "1분기", "1월" are the clause's period
    stress = [n for n in q.f.numbers if span(n) <= region and n.value == 1
              and n.unit in (None, "count")]  # fmt: skip
    clause |= {i for n in q.f.numbers if span(n) <= region and n not in stress for i in span(n)}
    for period_tokens in q.f.iso_tokens:
        if set(period_tokens) <= region:
            clause |= set(period_tokens)
    words = set(cue_words)
    words |= {i for i in region if q.tokens[i].form in _EMPHASIS}
    words |= {i for n in stress for i in span(n)}
    return frozenset(clause - words), frozenset(words)


# The links kb.plans.RELATED_PATHS can compile (kb.plans needs Django, the reader does not).
_RELATED_LINKS = {(CUSTOMERS, CONTRACTS), (CUSTOMERS, PAYMENTS), (CONTRACTS, PAYMENTS)}


def _universal_cue(q: Question):
    """ "계약이 전부 유지 중인 고객": 전부/모두 right after the rows' noun; such a customer has
    no contract that is not 유지."""
    rows = [m for v, m in q.f.kinds("noun") if v in ("contract", "payment", "premium")]
    heads = [m for v, m in q.f.kinds("noun") if v in RELATED_HEADS]
    for _, m in q.f.kinds("all"):
        if any(0 < m.first - r.last <= 1 for r in rows) and heads and heads[-1].first > m.last:
            return heads[-1].first, False, span(m)  # the clause is everything before the head
    return None


def _implicit_cue(q: Question):
    """ "올 상반기에 연체된 계약": a contract asked for by its payments, with no payment noun after
    the condition (then the payments themselves are asked for)."""
    heads = [m for v, m in q.f.kinds("noun") if v in RELATED_HEADS]
    if not heads or ("noun", "contract") not in heads[-1].payloads:
        return None
    statuses = [m for _, m in q.f.kinds("pay_status")]
    payment_nouns = [m for v, m in q.f.kinds("noun") if v in ("payment", "premium")]
    head = heads[-1]
    if not statuses or any(m.first > statuses[0].last for m in payment_nouns):
        return None
    if not all(m.last < head.first for m in statuses):
        return None
    return head.first, True, set()


def _first_cue(tokens, english_forms: frozenset | None, korean: dict[str, str]) -> int | None:
    """The first token that is one of the English forms, or a Korean form with its tag."""
    for i, token in tokens:
        if english_forms is not None:
            if token.form in english_forms:
                return i
        elif token.tag.startswith(korean.get(token.form, "\0")):
            return i
    return None


def _count_cue(q: Question):
    """(token index, True, tokens, N) of a count of the other rows: "계약이 2건 이상인",
    "미납 3건 넘는", "at least 2 contracts", "2 or more contracts"; None without one."""
    cmp_before = {m.last + 1: (v, m) for v, m in q.f.kinds("cmp")}
    cmp_after = {m.first: (v, m) for v, m in q.f.kinds("cmp")}
    counted_nouns = {m.first for v, m in q.f.kinds("noun") if v in ("contract", "payment")}
    for n in q.f.numbers:
        written_after = (
            n.last + 1 in cmp_after and cmp_after[n.last + 1][1].last + 1 in counted_nouns
        )
        if n.unit != "count" and not (n.unit is None and written_after):  # "2 or more contracts"
            continue
        if n.counter in ("명", "곳", "위", "등"):
            continue  # people and places are the rows answered, not the rows counted
        words = span(n)
        op = n.modifier if n.modifier in ("gte", "gt") else None
        for table, key in ((cmp_before, n.first), (cmp_after, n.last + 1)):
            if op is None and key in table and table[key][0] in ("gte", "gt"):
                op, m = table[key]
                words |= span(m)
        if op is None:
            continue
        at = n.first if question_language(q.text) == "ko" else min(words) - 1
        return at, True, words, n.value + (1 if op == "gt" else 0)
    return None


def _existence_cue(q: Question, english: bool):
    """(token index, exists?, tokens) of the word saying rows exist or not: 없는, 않은, 안 한,
    있는, 가진, no, never, without, with, have."""
    free = [(i, t) for i, t in enumerate(q.tokens) if i not in q.f.recognised]  # not "못 낸"
    negative = _first_cue(free, _NEGATIVE_EN if english else None, _NEGATIVE)
    if negative is not None:
        return negative, False, {negative}
    for _, m in q.f.kinds("negate"):
        if m.text.lower() == "without":
            return m.first, False, span(m)
    positive = _first_cue(free, _POSITIVE_EN if english else None, _POSITIVE)
    if positive is not None:
        return positive, True, {positive}
    if not english:
        for _, m in q.f.kinds("new"):
            if "가입" in m.text:
                return m.first, True, span(m)
    return None


def related_stages(q: Question, entity: str) -> list[Fragment]:
    """The conditions on the related rows: their period, statuses, products and amounts."""
    fragments = [period_stage(q, entity, frozenset()).fragment]
    taken = frozenset().union(*(f.consumed | f.unusable for f in fragments))
    fragments.append(values_stage(q, entity))
    fragments.append(status_stage(q, entity, taken))
    fragments.append(amount_stage(q, entity, taken))
    return fragments
