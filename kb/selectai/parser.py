"""Turn a Korean (or English) question about the KB demo into a structured query plan.

The plan (see `parse_prompt`) is executed by the data layer, which applies the VPD policy; the
prompt can narrow a question but never widen the asker's scope, and no SQL is produced here.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import unicodedata
from dataclasses import dataclass, field

from kb.catalogue import CONTRACTS, CUSTOMERS, ENTITIES, MAX_LIMIT, PAYMENTS, TOOL_DEFAULT_LIMIT

from . import dates
from .dates import Period, add_months, month_start, months_period
from .lexicon import Match
from .periods import PeriodResolver
from .recognise import NumberMention, recognise
from .vocabulary import Vocabulary
from .wording import (
    AGG_LABELS,
    DEFAULT_SCOPE,
    DIM_LABELS,
    HELP_EXAMPLES,
    HELP_FOOTER,
    MEASURE_LABELS,
    NO_DOMAIN,
    NO_QUESTION,
    NO_SQL,
    OP_LABELS,
    PARSE_FAILED,
    SCOPE_BY_ROLE,
    UNMAPPABLE_SUMMARY,
    WIDENING_NOTE,
    agg_label,
    filter_text,
    subject,
    summary,
)

log = logging.getLogger(__name__)

MAX_PROMPT_CHARS = 2000
MAX_WORD_CHARS = 64
DEFAULT_TOP_N = 10

FIELDS: dict[str, frozenset[str]] = {name: spec.columns for name, spec in ENTITIES.items()}
# Columns that identify a row, shown before any column a question asks for.
IDENTITY_FIELDS: dict[str, list[str]] = {
    name: list(spec.identity) for name, spec in ENTITIES.items()
}

CUSTOMER_DETAIL_FIELDS = ["customer_id", "customer_name", "birth_date", "age", "gender", "phone",
                          "rrn", "grade", "planner_id", "planner_name", "branch_id",
                          "branch_name", "joined_on"]  # fmt: skip

# Grouping dimension -> plan fields (ids kept next to names so equal names never merge).
DIM_FIELDS: dict[str, list[str]] = {
    "branch": ["branch_id", "branch_name"],
    "planner": ["planner_id", "planner_name"],
    "product": ["product_code", "product_name"],
    "category": ["category"],
    "grade": ["grade"],
    "status": ["status"],
    "gender": ["gender"],
    "age_group": ["age_group"],
    "customer": ["customer_id", "customer_name"],
    "contract": ["contract_id"],
    "month": ["due_month"],
}
RANKABLE_DIMS = {"planner", "branch", "product", "category", "grade"}
# Dimensions whose natural order is the key itself (a time series, an age ladder).
ORDERED_DIMS = {"month", "age_group"}

_SQL = re.compile(
    r"\bselect\s+(?:\*|distinct\b|count\s*\()|\bselect\b[^;]{0,200}?\bfrom\b[^;]{0,200}?"
    r"(?:\bwhere\b|\bjoin\b|;|=|\blimit\b)|\b(?:drop|truncate|alter)\s+(?:table|database|schema)\b"
    r"|\binsert\s+into\b|\bdelete\s+from\b|\bupdate\s+\w+\s+set\b|\bunion\s+(?:all\s+)?select\b"
    r"|;\s*(?:select|drop|delete|update|insert|alter|grant|truncate)\b|'\s*or\s+'?1'?\s*=\s*'?1"
    r"|\bor\s+1\s*=\s*1\b|--\s*$|/\*|\bexec(?:ute)?\s*\(|\bgrant\s+all\b",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass
class ParseResult:
    """plan: the query plan for the data layer, or None when the prompt could not be mapped.
    interpretation: Korean summary/family/scope/understood (+ ignored, notes) for the user.
    help: {"message", "examples"} when plan is None."""

    plan: dict | None
    interpretation: dict
    help: dict | None = None
    unexpressed: list[str] = field(default_factory=list)  # conditions a plan cannot express
    language: str = "ko"  # "en" when the question has no Korean in it


class _Unmappable(Exception):
    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------------------------------------
# Public entry point


def parse_prompt(
    prompt: str, *, vocabulary: Vocabulary, as_of: dt.date, role: str, limit: int
) -> ParseResult:
    """Parse a question into {entity, fields, filters, group_by, aggregates, order_by, limit}.

    Never raises: anything it cannot map (or any internal error) yields plan=None plus help.
    `role` only changes how the scope is phrased; the data layer applies the actual policy.
    """
    scope = SCOPE_BY_ROLE.get(role if isinstance(role, str) else "", DEFAULT_SCOPE)
    try:
        default_limit = _clamp_limit(limit)
        text = _normalise(prompt)
        if not text:
            raise _Unmappable(NO_QUESTION)
        if _SQL.search(text):
            raise _Unmappable(NO_SQL)
        return _Builder(text, vocabulary, as_of, scope, default_limit).build()
    except _Unmappable as exc:
        return _help_result(exc.message, scope)
    except Exception:  # the tool must answer even if a rule above has a bug
        log.exception("selectai parse failed")
        return _help_result(PARSE_FAILED, scope)


_HANGUL = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]")


def question_language(text: str) -> str:
    return "ko" if _HANGUL.search(text or "") else "en"


def help_examples() -> list[str]:
    return list(HELP_EXAMPLES)


def _help_result(message: str, scope: str) -> ParseResult:
    interpretation = {
        "summary": UNMAPPABLE_SUMMARY.format(scope=scope),
        "family": "unknown",
        "scope": scope,
        "understood": [],
    }
    help_ = {
        "message": f"{message} {HELP_FOOTER}",
        "examples": help_examples(),
    }
    return ParseResult(plan=None, interpretation=interpretation, help=help_)


def _clamp_limit(limit: object) -> int:
    try:
        value = int(limit)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        value = TOOL_DEFAULT_LIMIT
    return min(max(value, 1), MAX_LIMIT)


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
# Plan building


class _Builder:
    """Builds the plan for one prompt: entity, filters, shape (rows/groups/top-N), wording."""

    def __init__(self, text: str, vocabulary: Vocabulary, as_of: dt.date, scope: str, limit: int):
        if not isinstance(as_of, dt.date):
            as_of = dt.date.today()
        if isinstance(as_of, dt.datetime):
            as_of = as_of.date()
        self.text = text
        self.vocabulary = vocabulary
        self.as_of = as_of
        self.scope = scope
        self.default_limit = limit
        self.tokens, self.f = recognise(text, vocabulary)
        self.periods = PeriodResolver(self.f, self.tokens, as_of)
        self.understood: list[str] = []
        self.ignored: list[str] = []
        self.notes: list[str] = []
        self.applied_period: Period | None = None  # the period a filter was built from
        self._grouped: list[str] | None = None
        self.rank_unit: str | None = None  # what a ranking ranks (customer, planner, ...)
        self.warn_ignored: list[str] = []  # ignored words that could change the answer
        self.unexpressed: list[str] = []  # fields a condition named that a plan cannot express
        self._negated: set[tuple[int, int]] | None = None
        self.used_tokens: set[int] = set()  # tokens a condition read beyond the recognised ones
        self._status_kind: str | None = None

    # -- helpers over features ----------------------------------------------------------------

    def _agg_fns(self) -> list[str]:
        aggs = self.f.values("agg")
        if self.f.has("how_much") and not aggs and not self.f.has("extreme"):
            aggs = ["sum"]
        return aggs

    def _count_numbers(self) -> list[NumberMention]:
        """'5명', '10건', 'top 5 customers' -- not thresholds such as '3건 이상'."""
        return [n for n in self.f.numbers if n.unit == "count" and n.modifier not in _THRESHOLDS]

    def _count_thresholds(self) -> list[NumberMention]:
        return [n for n in self.f.numbers if n.unit == "count" and n.modifier in _THRESHOLDS]

    def _grouped_dims(self) -> list[str]:
        """Dimensions written as "X별", "by X", "X마다" (or 매월), in prompt order."""
        if self._grouped is not None:
            return self._grouped
        group_marks = [m for _, m in self.f.kinds("group")]
        dims: list[str] = []
        for m in self.f.matches:
            # One dimension per phrase: "계약 상태별" groups by status, not by contract too.
            dim = next((v for k, v in m.payloads if k == "dim"), None) or next(
                (v for k, v in m.payloads if k == "noun" and v in ("customer", "contract")), None
            )
            if dim is None:
                continue
            korean_suffix = any(g.first == m.last + 1 and not g.text.isascii() for g in group_marks)
            english_prefix = any(
                g.last + 1 == m.first and g.text.lower() in ("by", "per", "each")
                for g in group_marks
            )
            if ("group", True) in m.payloads or korean_suffix or english_prefix:
                dims.append(dim)
        self._grouped = list(dict.fromkeys(dims))
        return self._grouped

    # -- build --------------------------------------------------------------------------------

    def build(self) -> ParseResult:
        f = self.f
        if not self._has_domain_signal():
            raise _Unmappable(NO_DOMAIN)
        if f.has("all") or f.has("bypass"):
            self.notes.append(WIDENING_NOTE.format(scope=self.scope))

        for written, read_as in f.corrected:
            self.understood.append(f"'{written}'을(를) '{read_as}'(으)로 읽음")
        grouped = self._grouped_dims()
        rank = self._rank()
        entity = self._entity(grouped, rank)
        plan: dict = {
            "entity": entity,
            "fields": [],
            "filters": [],
            "group_by": [],
            "aggregates": [],
            "order_by": [],
            "limit": self.default_limit,
        }
        self._birth_filters(entity, plan)
        self._text_conditions(entity, plan)
        period, period_field = self._period_filter(entity, plan)
        self._vocabulary_filters(entity, plan)
        self._comparison_filters(entity, plan)
        family = self._shape(entity, plan, grouped, rank)
        if period is not None and period_field is None:
            self.ignored.append(f"기간 {dates.describe(period)}")
        # The caller's limit is the contract: the question may ask for fewer rows, never more.
        plan["limit"] = min(_clamp_limit(plan["limit"]), self.default_limit)
        interpretation = self._interpretation(plan, family)
        return ParseResult(
            plan=plan,
            interpretation=interpretation,
            unexpressed=list(self.unexpressed),
            language=question_language(self.text),
        )

    def _has_domain_signal(self) -> bool:
        f = self.f
        domain_kinds = ("noun", "measure", "pay_status", "contract_status", "expire", "product",
                        "category", "branch", "planner", "grade", "history", "sold",
                        "column", "birth")  # fmt: skip
        people = any(n.counter == "명" for n in f.numbers)  # "가장 최근에 가입한 5명"
        birth_years = any(
            self._birth_context(n) for n in f.numbers if n.unit in ("year", "years", "decade_years")
        )
        return bool(
            people
            or birth_years
            or f.customer_ids
            or f.contract_ids
            or f.customer_names
            or any(f.has(kind) for kind in domain_kinds)
        )

    # -- ranking ("상위 5명", "가장 많은", "최저") ----------------------------------------------

    def _rank(self) -> dict | None:
        f = self.f
        ranks = f.kinds("rank")
        sorts = f.kinds("sort")
        extremes = f.kinds("extreme")
        count_numbers = self._count_numbers()
        direction = None
        anchor = None
        by_count = False  # ranked by a count because the question set a count threshold
        if ranks:
            value, anchor = ranks[0]
            direction = "desc" if value == "top" else "asc"
        elif sorts:
            value, anchor = sorts[0]
            direction = value
        elif extremes and self._unit_candidates():
            # "최고 보험료 고객" ranks customers; "최대 월보험료" alone is an aggregate (below).
            value, anchor = extremes[0]
            direction = "desc" if value == "max" else "asc"
        elif self._count_thresholds() and self._unit_candidates():
            # "계약 2건 이상인 고객": a plan cannot filter on a count, so rank by it instead and
            # say so; the counts are in the result.
            threshold = self._count_thresholds()[0]
            first, last = threshold.first, threshold.last
            anchor = Match((("sort", "desc"),), first, last, "")
            sorts = [("desc", anchor)]
            direction = "asc" if threshold.modifier in ("lt", "lte") else "desc"
            by_count = True
            self.ignored.append(
                f"'{threshold.value}{threshold.counter or ''} {OP_LABELS[threshold.modifier]}' "
                "조건은 직접 적용할 수 없어 건수 순으로 정렬했습니다"
            )
        if direction is None:
            return None
        n = None
        for number in count_numbers:
            n = number.value
            break
        if n is None:
            # "top 5", "상위 5": a bare number right next to the rank word
            rank_words = [m for _, m in ranks + sorts + extremes]
            for number in f.numbers:
                if number.unit is None and any(
                    number.first == m.last + 1 or number.last + 1 == m.first for m in rank_words
                ):
                    n = number.value
                    break
        if n is None and sorts and not ranks:
            n = self.default_limit  # "높은 순으로" sorts; it does not cut the list short
        if n is None:
            n = 1 if (f.has("most") or extremes) else min(DEFAULT_TOP_N, self.default_limit)
        return {"direction": direction, "n": max(1, n), "anchor": anchor, "by_count": by_count}

    def _unit_candidates(self) -> list[tuple[int, str]]:
        """Things a ranking can rank, by position: customers, contracts, planners, branches..."""
        f = self.f
        grouped = set(self._grouped_dims())
        scope_words_end = {m.last for _, m in f.kinds("mine")} | {m.last for _, m in f.kinds("all")}
        out: list[tuple[int, str]] = []
        for m in f.matches:
            for kind, value in m.payloads:
                if kind == "noun" and value in ("customer", "contract"):
                    # "담당 고객 중 ..." names the scope, not the thing being ranked.
                    if value == "customer" and (m.first - 1) in scope_words_end:
                        continue
                    out.append((m.first, value))
                elif kind == "dim" and value in RANKABLE_DIMS and value not in grouped:
                    out.append((m.first, value))
        return out

    def _rank_unit(self, rank: dict) -> str:
        """The ranked thing: the first candidate after the rank word ("많은 설계사"), else the
        nearest before it ("customers with the highest ..."), else what the counter implies."""
        candidates = self._unit_candidates()
        anchor = rank["anchor"].first
        after = [unit for position, unit in candidates if position > anchor]
        before = [unit for position, unit in candidates if position < anchor]
        if after:
            return after[0]
        if before:
            return before[-1]
        grouped = [d for d in self._grouped_dims() if d in RANKABLE_DIMS | {"customer"}]
        if grouped:
            return grouped[0]  # "설계사별 월보험료 합계 상위 3명"
        counters = {n.counter for n in self._count_numbers()}
        return "branch" if "곳" in counters else "customer"

    # -- entity -------------------------------------------------------------------------------

    def _entity(self, grouped: list[str], rank: dict | None) -> str:
        """Which table answers the question. Most specific evidence first: a payment status means
        premium_payments, 만기 or a contract measure means contracts, "보험료" means payments unless
        it is a contract attribute, products/statuses mean contracts, anything else customers."""
        f = self.f
        nouns = set(f.values("noun"))
        measures = set(f.values("measure"))
        aggs = set(self._agg_fns()) | set(f.values("extreme"))
        has_time = bool(f.kinds("time") or f.iso_periods or self.periods.numbers())
        # "내역" means payment history unless it follows 계약 ("계약 내역") with no premium word.
        paymentish = bool(
            {"premium", "payment"} & nouns or (f.has("history") and "contract" not in nouns)
        )
        rank_unit = self.rank_unit = self._rank_unit(rank) if rank else None

        if f.contract_ids:
            return PAYMENTS if paymentish or f.has("pay_status") else CONTRACTS
        if f.has("pay_status"):
            return PAYMENTS
        if f.has("expire"):
            return CONTRACTS
        if measures & {"monthly_premium", "sum_insured"}:
            return CONTRACTS
        if paymentish or "amount" in measures:
            payment_words = "payment" in nouns or f.has("history") or "month" in grouped
            if not payment_words and not has_time:
                # A premium used as a contract attribute: "보험료 상위 5개 계약",
                # "평균 보험료", "보험료 10만원 이상 계약".
                if rank_unit == "contract":
                    return CONTRACTS
                if "contract" in nouns and (rank or self._money_numbers()):
                    return CONTRACTS
                if aggs & {"avg", "min", "max"} and "amount" not in measures:
                    return CONTRACTS
            return PAYMENTS
        if (
            "contract" in nouns
            or f.has("sold")
            or f.has("contract_status")
            or f.has("product")
            or f.has("category")
            or {"product", "category", "contract"} & set(grouped)
            or rank_unit in ("product", "category", "contract")
        ):
            return CONTRACTS
        return CUSTOMERS

    # -- filters ------------------------------------------------------------------------------

    def _add_filter(self, entity: str, plan: dict, fld: str, op: str, value, label: str) -> bool:
        if fld not in FIELDS[entity]:
            self.ignored.append(label)
            return False
        plan["filters"].append({"field": fld, "op": op, "value": value})
        self.understood.append(label)
        return True

    def _eq_or_in(self, entity: str, plan: dict, fld: str, values: list, label: str) -> None:
        """One condition on `fld`; excluded values ("자동차보험 제외") become ne/not_in."""
        if not values:
            return
        excluded = self._excluded_values(fld, values)
        kept = [v for v in values if v not in excluded]
        if len(kept) == 1:
            self._add_filter(entity, plan, fld, "eq", kept[0], label)
        elif kept:
            self._add_filter(entity, plan, fld, "in", list(kept), label)
        if excluded:
            op, value = ("ne", excluded[0]) if len(excluded) == 1 else ("not_in", excluded)
            self._add_filter(entity, plan, fld, op, value, f"{label} 제외")

    def _excluded_values(self, fld: str, values: list) -> list:
        kind = self._status_kind if fld == "status" else _FILTER_KINDS.get(fld)
        if kind is None:
            return []
        negated = self._negated_spans()
        expiry = [m for _, m in self.f.kinds("expire")] if fld == "status" else []
        return [
            value
            for value in values
            if any((m.first, m.last) in negated for v, m in self.f.kinds(kind) if v == value)
            or (value == "만기" and any((m.first, m.last) in negated for m in expiry))
        ]

    def _negated_spans(self) -> set[tuple[int, int]]:
        """Value phrases an exclusion word points at: the one just before 제외/말고/빼고/아닌/이외,
        or just after except/excluding/other than/not."""
        if self._negated is not None:
            return self._negated
        values = [m for m in self.f.matches if any(k in _NEGATABLE for k, _ in m.payloads)]
        spans: set[tuple[int, int]] = set()
        for _, word in self.f.kinds("negate"):
            if word.text.isascii():
                after = [m for m in values if 0 < m.first - word.last <= 2]
                target = after[0] if after else None
            else:
                before = [m for m in values if 0 < word.first - m.last <= 2]
                target = before[-1] if before else None
            if target is None:
                self.ignored.append(word.text)
                self.warn_ignored.append(word.text)
            else:
                spans.add((target.first, target.last))
        self._negated = spans
        return spans

    def _vocabulary_filters(self, entity: str, plan: dict) -> None:
        f, vocab = self.f, self.vocabulary
        self._eq_or_in(entity, plan, "customer_id", f.customer_ids,
                       "고객번호 " + ", ".join(f.customer_ids))  # fmt: skip
        self._eq_or_in(entity, plan, "contract_id", f.contract_ids,
                       "계약번호 " + ", ".join(f.contract_ids))  # fmt: skip
        if f.customer_names and not f.customer_ids:
            self._eq_or_in(entity, plan, "customer_name", f.customer_names,
                           "고객명 " + ", ".join(f.customer_names))  # fmt: skip
        products = [c for c in f.values("product") if c in vocab.products]
        self._eq_or_in(entity, plan, "product_code", products,
                       "상품 " + ", ".join(vocab.products[c].name for c in products))  # fmt: skip
        categories = [c for c in f.values("category") if c in vocab.categories]
        # "실손" (a 건강 product) plus "건강" says nothing new; keep the narrower product filter.
        product_categories = {vocab.products[c].category for c in products}
        categories = [c for c in categories if c not in product_categories]
        self._eq_or_in(entity, plan, "category", categories,
                       "카테고리 " + ", ".join(categories))  # fmt: skip
        branches = [b for b in f.values("branch") if b in vocab.branches]
        self._eq_or_in(entity, plan, "branch_id", branches,
                       "지점 " + ", ".join(vocab.branches[b] for b in branches))  # fmt: skip
        planners = [p for p in f.values("planner") if p in vocab.planners]
        self._eq_or_in(entity, plan, "planner_id", planners,
                       "설계사 " + ", ".join(vocab.planners[p] for p in planners))  # fmt: skip
        grades = [g for g in f.values("grade") if g in vocab.grades]
        self._eq_or_in(entity, plan, "grade", grades, "등급 " + ", ".join(grades))
        genders = f.values("gender")
        if len(genders) == 1 and "gender" not in self._grouped_dims():
            label = "성별 " + ("여성" if genders[0] == "F" else "남성")
            self._eq_or_in(entity, plan, "gender", genders, label)

        if entity == PAYMENTS:
            statuses = [s for s in f.values("pay_status") if s in vocab.payment_statuses]
            self._status_kind = "pay_status"
            self._eq_or_in(entity, plan, "status", statuses, "납입상태 " + ", ".join(statuses))
            if f.values("contract_status"):
                self.ignored.append("계약상태 " + ", ".join(f.values("contract_status")))
        elif entity == CONTRACTS:
            statuses = [s for s in f.values("contract_status") if s in vocab.contract_statuses]
            if self._expire_mode() == "status" and "만기" in vocab.contract_statuses:
                statuses.append("만기")
            if self._expire_mode() == "expiring" and self._expiring_is_future():
                statuses = statuses or (["유지"] if "유지" in vocab.contract_statuses else [])
            statuses = list(dict.fromkeys(statuses))
            self._status_kind = "contract_status"
            self._eq_or_in(entity, plan, "status", statuses, "계약상태 " + ", ".join(statuses))
        elif f.values("contract_status") or f.values("pay_status"):
            self.ignored.append("상태 조건(고객 조회에는 상태가 없습니다)")

        self._age_filters(entity, plan)

    def _age_filters(self, entity: str, plan: dict) -> None:
        """'30대' -> age_group, '60대 이상' -> the "60대 이상" band, '50세 이상' -> age."""
        for number in self.f.numbers:
            if number.unit == "decade":
                decade, modifier = number.value, number.modifier
                if modifier in ("gte", "gt") and decade == 60:
                    self._add_filter(entity, plan, "age_group", "eq", "60대 이상", "60대 이상")
                elif modifier in ("gte", "gt"):
                    self._add_filter(entity, plan, "age", "gte", decade, f"{decade}대 이상")
                elif modifier in ("lte", "lt"):
                    self._add_filter(entity, plan, "age", "lte", decade + 9, f"{decade}대 이하")
                elif decade < 60:
                    self._add_filter(entity, plan, "age_group", "eq", f"{decade}대", f"{decade}대")
                else:
                    # Decades from 60 up share one band in the data, so filter on age itself.
                    self._add_filter(entity, plan, "age", "between", [decade, decade + 9],
                                     f"{decade}대")  # fmt: skip
            elif number.unit == "age":
                op = number.modifier if number.modifier in ("gte", "gt", "lte", "lt") else "eq"
                self._add_filter(entity, plan, "age", op, number.value, f"나이 {number.value}세")

    def _money_numbers(self) -> list[NumberMention]:
        english_cmp = {m.last + 1 for _, m in self.f.kinds("cmp")}
        return [
            n for n in self.f.numbers
            if n.unit == "won" or (n.unit is None and n.value >= 1000
                                   and (n.modifier is not None or n.first in english_cmp))
        ]  # fmt: skip

    def _customer_joined(self) -> bool:
        """'가입한 고객': the joining word describes the customer, not the contract."""
        customers = [m for v, m in self.f.kinds("noun") if v == "customer"]
        return any(
            ("가입" in m.text or m.text.lower() == "joined")
            and any(0 < c.first - m.last <= 2 for c in customers)
            for _, m in self.f.kinds("new")
        )

    def _comparison_filters(self, entity: str, plan: dict) -> None:
        f = self.f
        english_cmp = {m.last + 1: v for v, m in f.kinds("cmp")}
        measures = f.kinds("measure")
        for number in self._money_numbers():
            op = number.modifier if number.modifier in ("gte", "gt", "lte", "lt") else None
            op = op or english_cmp.get(number.first) or self._cmp_after(number) or "gte"
            if entity == CONTRACTS:
                # The measure named last before the amount ("가입금액 3000만원 넘고 월보험료 …").
                before = [v for v, m in measures if m.last < number.first and v != "amount"]
                named = before[-1] if before else next((v for v, _ in measures), None)
                fld = "sum_insured" if named == "sum_insured" else "monthly_premium"
            elif entity == PAYMENTS:
                fld = "amount"
            else:
                self.ignored.append(f"금액 조건 {number.value:,}원")
                continue
            label = f"{MEASURE_LABELS.get(fld, fld)} {number.value:,}원 {OP_LABELS[op]}"
            self._add_filter(entity, plan, fld, op, number.value, label)
        for fld in ("monthly_premium", "sum_insured", "amount"):
            self._join_ranges(plan, fld)

    def _join_ranges(self, plan: dict, fld: str) -> None:
        """Two bounds on one field written as a range ("5만원에서 10만원 사이", "1975년생부터
        1980년생까지") become one between condition."""
        conditions = [x for x in plan["filters"] if x["field"] == fld]
        if len(conditions) != 2 or not _RANGE_WORDS.search(self.text):
            return
        self.used_tokens.update(i for i, t in enumerate(self.tokens) if t.form in ("사이", "~"))
        bounds = []
        for x in conditions:
            value = x["value"]
            bounds += value if x["op"] == "between" else [value]
        low, high = min(bounds), max(bounds)
        plan["filters"] = [x for x in plan["filters"] if x["field"] != fld]
        plan["filters"].append({"field": fld, "op": "between", "value": [low, high]})

    def _cmp_after(self, number: NumberMention) -> str | None:
        for value, m in self.f.kinds("cmp"):
            if m.first == number.last + 1:
                return value
        return None

    # -- birth dates and conditions on a column's text ------------------------------------------

    def _birth_context(self, number) -> bool:
        """A year is a birth year next to 생 ("87년생"), 출생/태어난/born or a birth-date column."""
        tokens = self.tokens
        following = number.last + 1
        if following < len(tokens) and tokens[following].form == "생":
            return True
        births = [m for _, m in self.f.kinds("birth")]
        births += [m for v, m in self.f.kinds("column") if v == "birth_date"]
        return any(-3 <= m.first - number.last <= 2 or 0 < number.first - m.last <= 3
                   for m in births)  # fmt: skip

    def _birth_filters(self, entity: str, plan: dict) -> None:
        """'1987년생', '80년대생', '1990년 이후 출생', 'born in March 1987', '생년월일이 …'."""
        f = self.f
        for number in list(f.numbers):
            if number not in f.numbers or not self._birth_year(number):
                continue
            year = number.value
            if year < 100:  # "87년생": the most recent such year up to the as-of date
                century = self.as_of.year // 100 * 100
                year = century + year if century + year <= self.as_of.year else century - 100 + year
            f.numbers.remove(number)
            decade = number.unit == "decade_years"
            first_day, last_day = dt.date(year, 1, 1), dt.date(year + 9 if decade else year, 12, 31)
            label = f"{year}년대" if decade else f"{year}년"
            modifier = number.modifier
            month, day, modifier = self._birth_month_day(number, modifier)
            if month is not None and not decade:
                first_day = last_day = dt.date(year, month, day or 1)
                if day is None:
                    last_day = dates.month_end(first_day)
                label = first_day.isoformat() if day else dates.month_key(first_day)
            if modifier == "from":
                flt, label = ("gte", first_day.isoformat()), f"출생 {label} 이후"
            elif modifier == "after":
                flt, label = ("gt", last_day.isoformat()), f"출생 {label} 이후"
            elif modifier == "before":
                flt, label = ("lt", first_day.isoformat()), f"출생 {label} 이전"
            elif first_day == last_day:
                flt, label = ("eq", first_day.isoformat()), f"생년월일 {label}"
            else:
                flt = ("between", [first_day.isoformat(), last_day.isoformat()])
                label = f"출생 {label}"
            self._add_filter(entity, plan, "birth_date", *flt, label)
        self._join_ranges(plan, "birth_date")
        birthday = [m for v, m in f.kinds("column") if v == "birth_date"] or (
            [m for v, m in f.kinds("birth") if m.text.lower() == "born"]
        )
        if not birthday:
            return
        for period in list(f.iso_periods):
            if period.start == period.end:  # one day: "생년월일이 1987-02-11인"
                f.iso_periods.remove(period)
                day = period.start.isoformat()
                self._add_filter(entity, plan, "birth_date", "eq", day, f"생년월일 {day}")
        days = [n for n in f.numbers if n.unit in ("month", "days")]
        if days:  # "생일이 2월 11일": a plan has no month-and-day condition
            for number in days:
                f.numbers.remove(number)
            self.unexpressed.append("birth_date")
            self.ignored.append("생일(월·일) 조건")
            self.warn_ignored.append("생일(월·일) 조건")

    def _birth_year(self, number: NumberMention) -> bool:
        if number.unit in ("year", "years", "decade_years"):
            return self._birth_context(number)
        # "born in March 1987": a bare four-digit year next to a birth word
        return number.unit is None and 1900 <= number.value <= 2999 and self._birth_context(number)

    def _birth_month_day(self, year: NumberMention, modifier):
        """The month (and day) written with a birth year: "1990년 1월 1일 이후", "March 1987"."""
        f, tokens = self.f, self.tokens
        month = day = None
        following = next(
            (n for n in f.numbers if n.first == year.last + 1 and n.unit == "month"), None
        )
        if following is not None:
            month = following.value
            f.numbers.remove(following)
            modifier = following.modifier or modifier
            on_day = next(
                (n for n in f.numbers if n.first == following.last + 1 and n.unit == "days"), None
            )
            if on_day is not None and 1 <= on_day.value <= 31:
                day = on_day.value
                f.numbers.remove(on_day)
                modifier = on_day.modifier or modifier
        elif year.first > 0 and tokens[year.first - 1].form in _MONTH_NAMES:
            month = _MONTH_NAMES[tokens[year.first - 1].form]
            f.spent.add(year.first - 1)  # not a period any more
            self.used_tokens.add(year.first - 1)
        if month is not None and day is not None:
            try:
                dt.date(year.value, month, day)
            except ValueError:
                day = None
        return month, day, modifier

    def _text_conditions(self, entity: str, plan: dict) -> None:
        """A value right after a personal column is a condition on it: '주민번호가 87로 시작하는',
        '전화번호 끝자리가 2842인', 'phone number 010-8108-7615', '이름이 신으로 시작하는'.

        Such a condition is never dropped: where the asker sees the column masked, answering
        refuses it (kb.answering), so a hidden value cannot be narrowed down by asking.
        """
        f, tokens, text = self.f, self.tokens, self.text
        operator_at = {i: op for op, o in f.kinds("text_op") for i in range(o.first, o.last + 1)}
        plain_numbers = {n.first: n for n in f.numbers if n.unit is None and n.first == n.last}
        for column, m in f.kinds("column"):
            if column not in ("phone", "rrn", "customer_name"):
                continue
            op, at = None, None
            for i in range(m.last + 1, min(m.last + 6, len(tokens))):
                if i in operator_at:
                    op = op or operator_at[i]
                elif at is None and self._column_value(tokens[i], column, i, plain_numbers):
                    at = i
                elif i in f.recognised:
                    break  # the next phrase ("목록", "고객") ends the condition
            if at is None:
                continue
            op = op or "eq"
            value = text[tokens[at].start : tokens[at].end]
            if at in plain_numbers:
                f.numbers.remove(plain_numbers[at])
            self.used_tokens.add(at)
            label = f"{ENTITIES[CUSTOMERS].fields[column].label} '{value}'{OP_LABELS[op]}"
            self._add_filter(entity, plan, column, op, value, label)
            if column == "customer_name":
                f.customer_names[:] = [n for n in f.customer_names if n != value]

    def _column_value(self, token, column: str, i: int, plain_numbers: dict) -> bool:
        if token.tag == "W_SERIAL" or i in plain_numbers:
            return True
        if token.tag == "SL":
            return any(ch.isdigit() for ch in token.form)
        # A name (or its first letters) for the name column: "이름이 신으로 시작하는".
        seen = self.f.recognised
        return column == "customer_name" and token.tag in ("NNG", "NNP") and i not in seen

    # -- periods ------------------------------------------------------------------------------

    def _expire_mode(self) -> str | None:
        """'expiring' (end_date ahead), 'status' (status 만기), or None without 만기."""
        f = self.f
        if not f.has("expire"):
            return None
        if f.has("expire", "future") or f.has("future"):
            return "expiring"
        if f.has("expire", "past"):
            return "status"
        period = self.periods.resolve(future=True)
        if period is not None and period.end > self.as_of:
            return "expiring"
        return "status"

    def _expiring_is_future(self) -> bool:
        """Whether an expiring window looks ahead (then only in-force contracts are meant)."""
        period = self.periods.resolve(future=True)
        return period is None or period.end > self.as_of

    def _period_filter(self, entity: str, plan: dict) -> tuple[Period | None, str | None]:
        expire_mode = self._expire_mode() if entity == CONTRACTS else None
        period = self.periods.resolve(future=expire_mode == "expiring")
        if expire_mode == "expiring" and period is None:
            # "만기 예정 계약" with no period: the next three calendar months.
            start = add_months(month_start(self.as_of), 1)
            period = months_period(start, add_months(start, 2), "향후 3개월")
        if expire_mode == "expiring" and period.start < self.as_of < period.end:
            # "올해 만기 예정": what is still ahead, from the as-of date.
            period = Period(self.as_of, period.end, period.label, whole_months=False)
        if period is None:
            return None, None
        if entity == PAYMENTS:
            period = period.clipped(not_after=self.as_of)
            if period.whole_months:
                first, last = period.months()
                if first == last:
                    plan["filters"].append({"field": "due_month", "op": "eq", "value": first})
                else:
                    plan["filters"].append(
                        {"field": "due_month", "op": "between", "value": [first, last]}
                    )
                fld = "due_month"
            else:
                plan["filters"].append(
                    {"field": "due_date", "op": "between",
                     "value": [period.start.isoformat(), period.end.isoformat()]}
                )  # fmt: skip
                fld = "due_date"
            self.understood.append(f"납입월 {dates.describe(period)}")
            self.applied_period = period
            return period, fld
        if entity == CONTRACTS:
            statuses = set(self.f.values("contract_status"))
            if expire_mode is None and self._customer_joined():
                fld, label = "joined_on", "고객 가입일"  # "2024년에 가입한 고객의 계약"
                period = period.clipped(not_after=self.as_of)
            elif expire_mode is not None:
                fld, label = "end_date", "만기일"
            elif statuses & {"해지", "실효"} and not self.f.has("new"):
                # There is no termination/lapse date column; do not guess with start_date.
                return period, None
            else:
                fld, label = "start_date", "계약 시작일"
                period = period.clipped(not_after=self.as_of)
        else:
            fld, label = "joined_on", "가입일"
            period = period.clipped(not_after=self.as_of)
        plan["filters"].append(
            {"field": fld, "op": "between",
             "value": [period.start.isoformat(), period.end.isoformat()]}
        )  # fmt: skip
        self.understood.append(f"{label} {dates.describe(period)}")
        self.applied_period = period
        return period, fld

    # -- shape: rows, groups, aggregates, order, limit ----------------------------------------

    def _measure_field(self, entity: str) -> str | None:
        measures = self.f.values("measure")
        if entity == PAYMENTS:
            return "amount"
        if entity == CONTRACTS:
            return "sum_insured" if "sum_insured" in measures else "monthly_premium"
        if "age" in measures or self.f.has("dim", "age_group"):
            return "age"
        return None

    def _shape(self, entity: str, plan: dict, grouped: list[str], rank: dict | None) -> str:
        f = self.f
        aggs = self._agg_fns()
        extremes = f.values("extreme") if rank is None else []
        measures = f.values("measure")
        counted = self._count_numbers()
        if counted and rank is None:
            plan["limit"] = counted[0].value  # "10건만", "다섯 명"
            self.understood.append(f"{counted[0].value}건")

        # Customer detail: one known customer, no aggregation.
        if (
            entity == CUSTOMERS
            and (f.customer_ids or f.customer_names)
            and not (grouped or aggs or rank)
        ):
            plan["fields"] = list(CUSTOMER_DETAIL_FIELDS)
            plan["order_by"] = [{"field": "customer_id", "direction": "asc"}]
            return "customer_detail"

        if rank is not None:
            return self._shape_rank(entity, plan, rank, grouped)

        if self._asks_for_unpaid_customers(entity, grouped, aggs):
            # "미납 고객 명단" / "미납자 몇 명": one row per customer, so the row count answers it.
            plan["group_by"] = list(DIM_FIELDS["customer"])
            plan["aggregates"] = [
                {"fn": "count", "field": None, "as": "count"},
                {"fn": "sum", "field": "amount", "as": "total_amount"},
            ]
            plan["order_by"] = [{"field": "total_amount", "direction": "desc"}]
            self.understood.append("미납 고객별 건수·금액")
            self.notes.append("고객별로 묶었으므로 결과 행 수가 미납 고객 수입니다.")
            return "unpaid"

        # age groups: "연령대별 고객 수" groups; "30대 고객" filters (handled in filters).
        group_dims = []
        for dim in grouped:
            fld = DIM_FIELDS[dim] if dim != "month" or entity == PAYMENTS else None
            if fld and all(x in FIELDS[entity] for x in fld):
                group_dims.append(dim)
            else:
                self.ignored.append(f"{DIM_LABELS[dim]}별 묶기")
        if f.has("dim", "age_group") and "age_group" not in group_dims:
            if not any(x["field"] in ("age", "age_group") for x in plan["filters"]):
                group_dims.append("age_group")
        if f.has("dim", "gender") and "gender" not in group_dims:
            if not f.values("gender"):
                group_dims.append("gender")

        amount_wanted = "amount" in measures and not (
            f.has("list") or f.has("history") or f.has("detail")
        )
        if group_dims or aggs or extremes or amount_wanted:
            self._aggregates(entity, plan, aggs, extremes, group_dims)
            if "age_group" in group_dims:
                return "age_group"
            return "aggregate"

        # Plain rows.
        return self._shape_rows(entity, plan)

    def _asks_for_unpaid_customers(self, entity: str, grouped: list[str], aggs: list) -> bool:
        f = self.f
        if entity != PAYMENTS or "미납" not in f.values("pay_status") or grouped:
            return False
        if set(aggs) - {"count"} or f.customer_ids or f.customer_names:
            return False
        # The customer must be what is unpaid ("미납 고객", "미납자"), not the scope ("담당 고객의
        # 미납 보험료"), and no premium word may follow it ("미납 고객의 보험료 내역" wants rows).
        unpaid_at = min(m.first for v, m in f.kinds("pay_status") if v == "미납")
        customer_at = [p for p, unit in self._unit_candidates() if unit == "customer"]
        customer_at = [p for p in customer_at if p >= unpaid_at]
        if not customer_at:
            return False
        return not any(m.first > customer_at[0] for v, m in f.kinds("noun") if v == "premium")

    def _aggregates(self, entity: str, plan: dict, aggs: list, extremes: list, dims: list) -> None:
        f = self.f
        measure = self._measure_field(entity)
        fns = list(aggs) + list(extremes)
        if not fns:
            if entity == PAYMENTS and "amount" in f.values("measure"):
                fns = ["sum"]
            elif entity == PAYMENTS:
                fns = ["count", "sum"]
            elif entity == CONTRACTS and set(f.values("measure")) & {"monthly_premium",
                                                                     "sum_insured"}:  # fmt: skip
                fns = ["sum"]
            elif f.has("noun", "premium") and entity == CONTRACTS:
                fns = ["sum"]
            else:
                fns = ["count"]
        aggregates = []
        for fn in dict.fromkeys(fns):
            if fn == "count":
                aggregates.append({"fn": "count", "field": None, "as": "count"})
                continue
            if measure is None or (fn == "sum" and measure == "age"):
                self.ignored.append(f"{AGG_LABELS[fn]}(합산할 금액 항목이 없습니다)")
                continue
            aggregates.append({"fn": fn, "field": measure, "as": _alias(fn, measure)})
        if not aggregates:
            aggregates.append({"fn": "count", "field": None, "as": "count"})
        plan["aggregates"] = aggregates
        plan["group_by"] = [x for dim in dims for x in DIM_FIELDS[dim]]
        for dim in dims:
            self.understood.append(f"{DIM_LABELS[dim]}별")
        for agg in aggregates:
            self.understood.append(agg_label(agg))
        if dims:
            first_dim = dims[0]
            if first_dim in ORDERED_DIMS:
                plan["order_by"] = [{"field": DIM_FIELDS[first_dim][0], "direction": "asc"}]
            else:
                plan["order_by"] = [{"field": aggregates[0]["as"], "direction": "desc"}]

    def _shape_rank(self, entity: str, plan: dict, rank: dict, grouped: list[str]) -> str:
        f = self.f
        unit = self.rank_unit or self._rank_unit(rank)
        aggs = self._agg_fns()
        nouns = set(f.values("noun"))
        measures = set(f.values("measure"))
        plan["limit"] = rank["n"]
        direction = rank["direction"]
        label_dir = "상위" if direction == "desc" else "하위"

        # What is being compared: money, age, or a count of something.
        counted = None
        if (
            rank["by_count"]
            or "count" in aggs
            or not (measures or {"premium", "payment"} & nouns or entity == PAYMENTS)
        ):
            counted = "count"
        measure = None if counted else self._measure_field(entity)
        if measure is None:
            counted = "count"

        row_level = (unit == "contract" and entity == CONTRACTS) or (
            unit == "customer" and entity == CUSTOMERS and measure == "age"
        )
        if row_level and measure is not None:
            plan["order_by"] = [{"field": measure, "direction": direction}]
            self.understood.append(
                f"{MEASURE_LABELS.get(measure, measure)} {label_dir} {rank['n']}"
            )
            return "top_n"

        dim = unit if unit in DIM_FIELDS else "customer"
        if not all(x in FIELDS[entity] for x in DIM_FIELDS[dim]):
            self.ignored.append(f"{DIM_LABELS[dim]} 기준 순위")
            dim = "customer" if "customer_id" in FIELDS[entity] else None
        extra_dims = [
            d for d in grouped if d != dim and all(x in FIELDS[entity] for x in DIM_FIELDS[d])
        ]
        group_dims = ([dim] if dim else []) + extra_dims
        if counted == "count":
            agg = {"fn": "count", "field": None, "as": "count"}
        else:
            fn = "avg" if "avg" in aggs else "sum"
            agg = {"fn": fn, "field": measure, "as": _alias(fn, measure)}
        plan["group_by"] = [x for d in group_dims for x in DIM_FIELDS[d]]
        plan["aggregates"] = [agg]
        plan["order_by"] = [{"field": agg["as"], "direction": direction}]
        self.understood.append(f"{agg_label(agg)} {label_dir} {rank['n']}")
        return "top_n"

    def _requested_columns(self, entity: str, plan: dict) -> None:
        """ "고객 전화번호 목록" -> the row's identity columns plus the columns asked for."""
        wanted = self.f.values("column")
        available = [c for c in wanted if c in FIELDS[entity]]
        for column in wanted:
            if column not in FIELDS[entity]:
                self.ignored.append(f"{column} 항목")
        if available:
            plan["fields"] = list(dict.fromkeys(IDENTITY_FIELDS[entity] + available))
            self.understood.append("항목 " + ", ".join(available))

    def _sort_column(self, entity: str) -> str | None:
        """The column named right before "순"/"순서" ("계약일 순으로", "이름 순")."""
        columns = {m.last: v for v, m in self.f.kinds("column")}
        for value, m in self.f.kinds("order"):
            column = columns.get(m.first - 1)
            if value == "by_column" and column in FIELDS[entity]:
                return column
        return None

    def _shape_rows(self, entity: str, plan: dict) -> str:
        f = self.f
        self._requested_columns(entity, plan)
        order = f.values("order")
        if not order and f.has("recent") and self.applied_period is None:
            order = ["desc_date"]  # "최근 가입한 고객": newest first
        sort_column = self._sort_column(entity)
        if sort_column is not None:
            direction = "desc" if "desc_date" in order or f.has("sort", "desc") else "asc"
            plan["order_by"] = [{"field": sort_column, "direction": direction}]
        date_field = ENTITIES[entity].date_field
        if order and not plan["order_by"]:
            direction = "asc" if "asc_date" in order else "desc"
            plan["order_by"] = [{"field": date_field, "direction": direction}]
            label = ENTITIES[entity].fields[date_field].label
            self.understood.append(f"{label} {'오래된 순' if direction == 'asc' else '최신순'}")
        if entity == PAYMENTS:
            if not plan["order_by"] or plan["order_by"][0]["field"] == "due_month":
                direction = plan["order_by"][0]["direction"] if plan["order_by"] else "desc"
                plan["order_by"] = [{"field": "due_month", "direction": direction},
                                    {"field": "contract_id", "direction": "asc"}]  # fmt: skip
            return "unpaid" if "미납" in f.values("pay_status") else "premium_detail"
        if entity == CONTRACTS:
            if self._expire_mode() == "expiring":
                plan["order_by"] = plan["order_by"] or [{"field": "end_date", "direction": "asc"}]
                return "expiring"
            plan["order_by"] = plan["order_by"] or [{"field": "contract_id", "direction": "asc"}]
            return "contracts"
        plan["order_by"] = plan["order_by"] or [{"field": "customer_id", "direction": "asc"}]
        if any(x["field"] in ("age", "age_group") for x in plan["filters"]):
            return "age_group"
        return "customer_list"

    # -- interpretation -----------------------------------------------------------------------

    def _interpretation(self, plan: dict, family: str) -> dict:
        period = self.applied_period
        period_text = dates.describe(period, with_label=False) if period else ""
        dims = [d for d, fields in DIM_FIELDS.items() if fields[0] in plan["group_by"]]
        dims.sort(key=lambda d: plan["group_by"].index(DIM_FIELDS[d][0]))
        conditions = filter_text(plan, family, self.vocabulary)
        head = " ".join(x for x in (period_text, conditions, subject(plan, family, dims)) if x)
        self._unused_words(plan)
        interpretation = {
            # Words that could change the answer but were not used are said where it starts.
            "summary": summary(
                head,
                self.scope,
                plan["limit"],
                warn=self.warn_ignored,
                language=question_language(self.text),
            ),
            "family": family,
            "scope": self.scope,
            "entity": plan["entity"],
            "understood": list(dict.fromkeys([ENTITIES[plan["entity"]].label, *self.understood])),
            "ignored": list(dict.fromkeys(self.ignored)),
        }
        if self.notes:
            interpretation["notes"] = self.notes
        return interpretation

    def _unused_words(self, plan: dict) -> None:
        """Content words nothing read go to `ignored`; numbers, dates and names also warn."""
        f, tokens, text = self.f, self.tokens, self.text
        names = {
            i
            for i, t in enumerate(tokens)
            if any(text[t.start : t.end] in name for name in f.customer_names)
        }
        said = " ".join(self.understood) + " " + str(plan)
        for i, token in enumerate(tokens):
            if i in f.recognised or i in self.used_tokens or i in names:
                continue
            if token.tag not in _CONTENT_TAGS:
                continue
            if token.form in _FUNCTION_WORDS or (token.tag == "NNB" and len(token.form) == 1):
                continue
            word = text[token.start : token.end]
            self.ignored.append(word)
            if token.tag in _WARN_TAGS:
                self.warn_ignored.append(word)
        for number in f.numbers:
            if self._number_used(number, plan, said):
                continue
            word = text[tokens[number.first].start : tokens[number.last].end]
            self.ignored.append(word)
            self.warn_ignored.append(word)

    def _number_used(self, number: NumberMention, plan: dict, said: str) -> bool:
        if number.unit in _TIME_UNITS and self.applied_period is not None:
            return True
        if number.value == plan["limit"] or str(number.value) in said:
            return True
        return f"{number.value:,}" in said


_THRESHOLDS = ("gte", "gt", "lte", "lt")
# Words that make two bounds one range.
_RANGE_WORDS = re.compile(r"부터|까지|사이|에서|~|\b(?:between|to|from)\b", re.IGNORECASE)
_MONTH_NAMES = {name: i for i, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september",
     "october", "november", "december"], start=1)}  # fmt: skip
_TIME_UNITS = {"months", "years", "weeks", "days", "month", "year", "quarter"}
# Words worth reporting as not understood: nouns, numbers, foreign words, adjectives.
_CONTENT_TAGS = frozenset({"NNG", "NNP", "NNB", "SL", "SN", "SH", "XR", "W_SERIAL", "VA"})
# Numbers, dates and names change which rows answer: when one is not used, the summary says so.
_WARN_TAGS = frozenset({"NNP", "SN", "W_SERIAL", "SH"})
# Words that carry no condition ("보여줘", "please show me the").
_FUNCTION_WORDS = frozenset(
    "보이 보여주 주 알리 알려주 하 있 없 되 싶 말하 찾 조회 뽑 출력 구하 확인 궁금 좀 것 거 수 등 "
    "중 경우 번 때 인 데이터 자료 현황 결과 부탁 요청 전체 모든 기준 관련 대하 대한 해당 각 "
    "please show me the a an of for with and or in on to is are was were what which who whose "
    "list give get find how do does my all that this by their i want see tell about can could "
    "would you display there have has our any from as at be been it its".split()
)
# The lexicon kind each filterable value comes from, for exclusions ("VIP 말고").
_FILTER_KINDS = {"product_code": "product", "category": "category", "branch_id": "branch",
                 "planner_id": "planner", "grade": "grade", "gender": "gender"}  # fmt: skip
_NEGATABLE = frozenset({*_FILTER_KINDS.values(), "contract_status", "pay_status", "expire"})


def _alias(fn: str, fld: str) -> str:
    if fn == "sum":
        return f"total_{fld}"
    return f"{fn}_{fld}"
