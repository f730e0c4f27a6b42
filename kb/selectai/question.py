"""The analysed question the reader's stages share: Kiwi's tokens, what they were recognised as,
and the readings several stages need (what is grouped, ranked or excluded).

Nothing here changes once made: a stage reads a `Question` and returns a fragment of the plan plus
the tokens it used (kb.selectai.stages); kb.selectai.parser composes them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .lexicon import Match, Token
from .periods import PeriodResolver
from .recognise import Features, NumberMention, recognise
from .vocabulary import Vocabulary

THRESHOLDS = ("gte", "gt", "lte", "lt")
RANKABLE_DIMS = frozenset({"planner", "branch", "product", "category", "grade"})
DEFAULT_TOP_N = 10


class reading:  # noqa: N801 (used like functools.cached_property)
    """A reading of the question, worked out on first use and kept: functools.cached_property
    without its lock, which costs more than most readings (one question is read by one thread)."""

    def __init__(self, method):
        self.method = method
        self.name = method.__name__
        self.__doc__ = method.__doc__

    def __get__(self, question, owner=None):
        if question is None:
            return self
        value = question.__dict__[self.name] = self.method(question)
        return value


_HANGUL = re.compile(r"[\uac00-\ud7a3\u3131-\u318e]")


def question_language(text: str) -> str:
    """ "ko" for a question with Korean in it (its grammar is read as Korean), "en" for another."""
    return "ko" if _HANGUL.search(text or "") else "en"


_WORDS = re.compile(r"[A-Za-z]+|[\uac00-\ud7a3]+")


def main_language(text: str) -> str:
    """The language an answer to `text` is written in: English when its English words outnumber
    its Korean ones ("show me 강남지점's VIP customers"), else Korean. Words in capitals (VIP,
    KB) are codes, not English."""
    english = korean = 0
    for word in _WORDS.findall(text or ""):
        if word.isascii():
            english += not word.isupper()
        else:
            korean += 1
    return "en" if english > korean else "ko"


def span(m: Match | NumberMention) -> set[int]:
    return set(range(m.first, m.last + 1))


@dataclass(frozen=True)
class Rank:
    """A ranking the question asks for: "상위 5명", "가장 많은", "최저", "높은 순으로"."""

    direction: str  # asc / desc
    n: int
    anchor: Match
    by_count: bool  # ranked by a count because the question set a count threshold
    threshold: NumberMention | None = None
    consumed: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Negations:
    targets: dict[tuple[int, int], set[int]]  # negated value phrase -> its exclusion word's tokens
    pointless: tuple[Match, ...]  # exclusion words next to no value


@dataclass
class Question:
    text: str
    vocabulary: Vocabulary
    as_of: dt.date
    limit: int  # the caller's limit: a question may ask for fewer rows, never more
    role: str = ""
    asker_id: str | None = None  # who asks, for "다른 설계사" (everyone but the asker)
    asker_branch: str | None = None
    tokens: list[Token] = field(default_factory=list)
    f: Features = field(default_factory=Features)
    analysed: bool = False
    expire_modes: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if not self.analysed:
            self.tokens, self.f = recognise(self.text, self.vocabulary)
            self.analysed = True

    def only(self, keep: set[int] | frozenset[int]) -> Question:
        """The same question with only what was recognised in `keep` (the tokens of one clause,
        or all but it): a clause's stages then read nothing outside it."""
        f = self.f

        def inside(first: int, last: int) -> bool:
            return all(i in keep for i in range(first, last + 1))

        names = {n: t for n, t in f.name_tokens.items() if all(i in keep for i in t)}
        iso = [(p, t) for p, t in zip(f.iso_periods, f.iso_tokens, strict=True) if set(t) <= keep]
        ids = f.id_tokens & set(keep)
        part = Features(
            matches=[m for m in f.matches if inside(m.first, m.last)],
            numbers=[n for n in f.numbers if inside(n.first, n.last)],
            customer_ids=list(f.customer_ids) if ids == f.id_tokens else [],
            contract_ids=list(f.contract_ids) if ids == f.id_tokens else [],
            id_tokens=ids,
            customer_names=list(names),
            name_tokens=names,
            iso_periods=[p for p, _ in iso],
            iso_tokens=[t for _, t in iso],
            corrected=list(f.corrected),
            recognised=set(f.recognised),
        )
        return dataclasses.replace(self, f=part, expire_modes={})

    def periods(self, taken: frozenset[int] = frozenset()) -> PeriodResolver:
        return PeriodResolver(self.f, self.tokens, self.as_of, taken)

    def words(self, tokens: set[int] | frozenset[int]) -> list[str]:
        """The text of `tokens`, one item per run of adjacent tokens, in prompt order."""
        out: list[str] = []
        run: list[int] = []
        for i in sorted(tokens):
            if run and i != run[-1] + 1:
                out.append(self._text_of(run))
                run = []
            run.append(i)
        if run:
            out.append(self._text_of(run))
        return out

    def _text_of(self, run: list[int]) -> str:
        return self.text[self.tokens[run[0]].start : self.tokens[run[-1]].end]

    # -- readings ----------------------------------------------------------------------------

    @reading
    def agg_fns(self) -> Sequence[str]:
        aggs: Sequence[str] = self.f.values("agg")
        if self.f.has("how_much") and not aggs and not self.f.has("extreme"):
            aggs = ["sum"]
        return aggs

    @reading
    def count_numbers(self) -> list[NumberMention]:
        """'5명', '10건', 'top 5 customers' -- not thresholds such as '3건 이상'."""
        return [n for n in self.f.numbers if n.unit == "count" and n.modifier not in THRESHOLDS]

    @reading
    def count_thresholds(self) -> list[NumberMention]:
        return [n for n in self.f.numbers if n.unit == "count" and n.modifier in THRESHOLDS]

    @reading
    def grouped_dims(self) -> list[str]:
        """Dimensions written as "X별", "by X", "X마다" (or 매월), in prompt order."""
        return list(dict.fromkeys(dim for dim, _ in self.grouping_matches))

    @reading
    def grouping_matches(self) -> list[tuple[str, Match]]:
        group_marks = [m for _, m in self.f.kinds("group")]
        found: list[tuple[str, Match]] = []
        for m in self.f.matches:
            if m is self.monthly_amount:
                continue
            # One dimension per phrase: "계약 상태별" groups by status, not by contract too.
            dim = next((v for k, v in m.payloads if k == "dim"), None) or next(
                (v for k, v in m.payloads if k == "noun" and v in ("customer", "contract")), None
            )
            if dim is None:
                continue
            korean_suffix = any(g.first == m.last + 1 and not g.text.isascii() for g in group_marks)
            # "지점마다": Kiwi drops the particle 마다, so it is read from the text after the word
            korean_suffix |= self.text.startswith("마다", self.tokens[m.last].end)
            english_prefix = any(
                g.last + 1 == m.first and g.text.lower() in ("by", "per", "each")
                for g in group_marks
            )
            if ("group", True) in m.payloads or korean_suffix or english_prefix:
                found.append((dim, m))
        return found

    @reading
    def unit_candidates(self) -> list[tuple[int, str]]:
        """Things a ranking can rank, by position: customers, contracts, planners, branches..."""
        f = self.f
        grouped = set(self.grouped_dims)
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

    @reading
    def rank(self) -> Rank | None:
        f = self.f
        ranks, sorts, extremes = f.kinds("rank"), f.kinds("sort"), f.kinds("extreme")
        direction = anchor = threshold = None
        by_count = False
        if ranks:
            value, anchor = ranks[0]
            direction = "desc" if value == "top" else "asc"
        elif sorts:
            value, anchor = sorts[0]
            direction = value
        elif extremes and self.unit_candidates:
            # "최고 보험료 고객" ranks customers; "최대 월보험료" alone is an aggregate.
            value, anchor = extremes[0]
            direction = "desc" if value == "max" else "asc"
        elif self.count_thresholds and self.unit_candidates:
            # "계약 2건 이상인 고객": a plan cannot filter on a count; the composer refuses it.
            threshold = self.count_thresholds[0]
            anchor = Match((("sort", "desc"),), threshold.first, threshold.last, "")
            sorts = [("desc", anchor)]
            direction = "asc" if threshold.modifier in ("lt", "lte") else "desc"
            by_count = True
        if direction is None:
            return None
        assert anchor is not None  # every branch that sets a direction sets its anchor
        consumed = set().union(*(span(m) for _, m in ranks + sorts + extremes))
        consumed |= {i for _, m in f.kinds("most") for i in span(m)}
        n = None
        for number in self.count_numbers:
            n = number.value
            consumed |= span(number)
            break
        if n is None:
            # "top 5", "상위 5": a bare number right next to the rank word
            rank_words = [m for _, m in ranks + sorts + extremes]
            for number in f.numbers:
                if number.unit is None and any(
                    number.first == m.last + 1 or number.last + 1 == m.first for m in rank_words
                ):
                    n = number.value
                    consumed |= span(number)
                    break
        if n is None and sorts and not ranks:
            n = self.limit  # "높은 순으로" sorts; it does not cut the list short
        if n is None:
            n = 1 if (f.has("most") or extremes) else min(DEFAULT_TOP_N, self.limit)
        return Rank(direction, max(1, n), anchor, by_count, threshold, frozenset(consumed))

    @reading
    def rank_unit(self) -> str | None:
        """The ranked thing: the first candidate after the rank word ("많은 설계사"), else the
        nearest before it ("customers with the highest ..."), else what the counter implies."""
        rank = self.rank
        if rank is None:
            return None
        candidates = self.unit_candidates
        anchor = rank.anchor.first
        after = [unit for position, unit in candidates if position > anchor]
        before = [unit for position, unit in candidates if position < anchor]
        if after:
            return after[0]
        if before:
            return before[-1]
        grouped = [d for d in self.grouped_dims if d in RANKABLE_DIMS | {"customer"}]
        if grouped:
            return grouped[0]  # "설계사별 월보험료 합계 상위 3명"
        counters = {n.counter for n in self.count_numbers}
        return "branch" if "곳" in counters else "customer"

    @reading
    def negations(self) -> Negations:
        """Which value phrases the exclusion words point at, and which point at nothing.

        The value is the one just before 제외/말고/빼고/아닌/이외, or just after
        except/excluding/other than/not; in a list ("A와 B 말고", "A, B 제외") every value of it.
        """
        values = [m for m in self.f.matches if any(k in NEGATABLE for k, _ in m.payloads)]
        targets: dict[tuple[int, int], set[int]] = {}
        pointless: list[Match] = []
        for _, word in self.f.kinds("negate"):
            if word.text.isascii():
                after = [m for m in values if m.first > word.last]
                after = [m for m in after if self._only_filler_between(word.last, m.first)]
                target = after[0] if after else None
                listed = self._listed_after(values, target) if target else []
            else:
                before = [m for m in values if m.last < word.first]
                before = [m for m in before if self._only_filler_between(m.last, word.first)]
                target = before[-1] if before else None
                listed = self._listed_before(values, target) if target else []
            if target is None:
                pointless.append(word)
                continue
            for m in [target, *listed]:
                targets.setdefault((m.first, m.last), set()).update(span(word))
        return Negations(targets, tuple(pointless))

    def _only_filler_between(self, last: int, first: int) -> bool:
        """Nothing but filler between two tokens ("except those in the Gangnam branch")."""
        if first - last > 5:
            return False
        between = range(last + 1, first)
        return first - last <= 2 or all(self.tokens[i].form in FILLER_FORMS for i in between)

    def _listed_before(self, values: list[Match], target: Match) -> list[Match]:
        """The values listed before `target` with 와/과/이나/, between them ("A와 B 말고")."""
        listed, current = [], target
        for m in reversed([v for v in values if v.last < target.first]):
            if not self._only_joiners_between(m.last, current.first):
                break
            listed.append(m)
            current = m
        return listed

    def _listed_after(self, values: list[Match], target: Match) -> list[Match]:
        listed, current = [], target
        for m in [v for v in values if v.first > target.last]:
            if not self._only_joiners_between(current.last, m.first):
                break
            listed.append(m)
            current = m
        return listed

    def _only_joiners_between(self, last: int, first: int) -> bool:
        """Only list joiners (and, or, 와, 이나, a comma) lie between two phrases."""
        between = self.text[self.tokens[last].end : self.tokens[first].start]
        words = between.replace(",", " ").replace("/", " ").split()
        return all(w.lower() in LIST_JOINERS for w in words) and first - last <= 3

    @reading
    def money_numbers(self) -> list[NumberMention]:
        """Amounts: "10만원", "50,000 won", and bare numbers from 1,000 up that are compared or
        sit beside a money word ("가입금액 5천만~1억")."""
        english_cmp = {m.last + 1 for _, m in self.f.kinds("cmp")}
        money_named = any(v != "age" for v in self.f.values("measure")) or self.f.has(
            "noun", "premium"
        )
        return [
            n for n in self.f.numbers
            if n.unit == "won" or (n.unit is None and n.value >= 1000
                                   and (n.modifier is not None or n.first in english_cmp
                                        or (money_named and not 1900 <= n.value <= 2999)))
        ]  # fmt: skip

    @reading
    def monthly_amount(self) -> Match | None:
        """ "매달 20만원 넘게", "월 10만원 이상": the monthly premium, not payments by month."""
        for m in self.f.matches:
            if ("dim", "month") not in m.payloads:
                continue
            if any(0 < n.first - m.last <= 2 for n in self.money_numbers):
                return m
        return None

    @reading
    def customer_joined(self) -> bool:
        """'가입한 고객': the joining word describes the customer, not the contract."""
        customers = [m for v, m in self.f.kinds("noun") if v == "customer"]
        return any(
            ("가입" in m.text or m.text.lower() == "joined")
            and any(0 < c.first - m.last <= 2 for c in customers)
            for _, m in self.f.kinds("new")
        )

    def expire_mode(self, taken: frozenset[int]) -> str | None:
        # Asked by several stages with the same tokens taken: worked out once for those.
        if taken not in self.expire_modes:
            self.expire_modes[taken] = self._expire_mode(taken)
        return self.expire_modes[taken]

    def _expire_mode(self, taken: frozenset[int]) -> str | None:
        """'expiring' (end_date ahead), 'status' (status 만기), 'end_date' (a period on the
        end date column, whatever the status), or None without 만기."""
        f = self.f
        if not f.has("expire"):
            return None
        if f.has("expire", "future") or f.has("future"):
            return "expiring"
        if f.has("expire", "past"):
            return "status"
        period = self.periods(taken).resolve(future=True)
        named = [m for _, m in f.kinds("expire")]
        if period is not None and all(("column", "end_date") in m.payloads for m in named):
            return "end_date"  # "만기일이 7월부터 12월까지인": a condition on the date itself
        if period is not None and period.end > self.as_of:
            return "expiring"
        return "status"

    def expiring_is_future(self, taken: frozenset[int]) -> bool:
        """Whether an expiring window looks ahead (then only in-force contracts are meant)."""
        period = self.periods(taken).resolve(future=True)
        return period is None or period.end > self.as_of

    def birth_context(self, number: NumberMention) -> bool:
        """A year is a birth year next to 생 ("87년생"), 출생/태어난/born or a birth-date column."""
        tokens = self.tokens
        following = number.last + 1
        if following < len(tokens) and tokens[following].form == "생":
            return True
        month = next(
            (n for n in self.f.numbers if n.first == following and n.unit == "month"), None
        )
        if month is not None:  # "1989년 9월생", "1987년 2월 11일생"
            day = next(
                (n for n in self.f.numbers if n.first == month.last + 1 and n.unit == "days"), None
            )
            last = (day or month).last
            if last + 1 < len(tokens) and tokens[last + 1].form == "생":
                return True
        births = [m for _, m in self.f.kinds("birth")]
        births += [m for v, m in self.f.kinds("column") if v == "birth_date"]
        return any(-3 <= m.first - number.last <= 2 or 0 < number.first - m.last <= 3
                   for m in births)  # fmt: skip

    def has_domain_signal(self) -> bool:
        f = self.f
        people = any(n.counter == "명" for n in f.numbers)  # "가장 최근에 가입한 5명"
        tokens = self.tokens
        people |= any(  # "11월 14일생": people born then
            n.last + 1 < len(tokens) and tokens[n.last + 1].form == "생" for n in f.numbers
        )
        birth_years = any(
            self.birth_context(n) for n in f.numbers if n.unit in ("year", "years", "decade_years")
        )
        return bool(
            people
            or birth_years
            or f.customer_ids
            or f.contract_ids
            or f.customer_names
            or any(f.has(kind) for kind in DOMAIN_KINDS)
        )


DOMAIN_KINDS = ("noun", "measure", "pay_status", "contract_status", "expire", "product",
                "category", "branch", "planner", "grade", "history", "sold", "column", "birth",
                "absent")  # fmt: skip
# The lexicon kind each filterable value comes from, for exclusions ("VIP 말고").
FILTER_KINDS = {"product_code": "product", "category": "category", "branch_id": "branch",
                "planner_id": "planner", "grade": "grade", "gender": "gender"}  # fmt: skip
NEGATABLE = frozenset({*FILTER_KINDS.values(), "contract_status", "pay_status", "expire", "region"})
# Words that may stand between an exclusion word and what it excludes.
FILLER_FORMS = frozenset(
    "those that the in at of from any all who are is ones 있 하 되 것 거 들 "
    "고객 계약 customers contracts".split()
)
LIST_JOINERS = frozenset("와 과 및 또는 이나 나 랑 이랑 하고 혹은 and or & either nor".split())
