"""The Select AI prompt suite: questions by family, each with its truth computed from the CSV files.

Every expectation is computed here with plain Python over kb/data/kb_demo/*.csv (tests.kb.truth),
never through the code under test. A case is (family, stakeholder, prompt, limit, check); `run`
asks kb.answering.answer_question and raises AssertionError when the answer is not the truth.
Checks are strict on content and tolerant on presentation: the key ids of the rows (a set, or a
sequence for rankings), a group -> number mapping for aggregates, and for "... 수" either one
count row or the rows themselves. Used by tests/kb/test_selectai_suite.py and
bench/selectai_accuracy.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import pytest

from tests.kb.truth import (
    PRODUCTS,
    age,
    assert_policy_exact,
    role_of,
    visible_contracts,
    visible_customers,
    visible_payments,
)

FAMILIES = (
    "paraphrase",
    "english",
    "range",
    "age_birth",
    "join_year",
    "gender",
    "grade",
    "status",
    "negation",
    "cross_entity",
    "ranking",
    "period",
    "masked",
)
COUNT_COLUMNS = ("count", "customer_count", "contract_count", "payment_count")
HANGUL = re.compile(r"[\uac00-\ud7a3]")

# What one question's run comes to (bench/selectai_accuracy.py prints these per family):
RIGHT = "right"  # the truth, or the refusal the case expects
REFUSED = "refused"  # a refusal that names what it could not use, where an answer was possible
FLAGGED = "flagged"  # a wrong answer that says it left words out (interpretation.ignored)
SILENT = "silent"  # a wrong answer that says nothing: the defect that matters most
OUTCOMES = (RIGHT, REFUSED, FLAGGED, SILENT)


@dataclass(frozen=True)
class Case:
    id: str
    family: str
    stakeholder_id: str
    prompt: str
    limit: int
    check: Callable  # (answer) for answers, (exception) for refusals; raises AssertionError
    refusal: bool = False

    def ask(self) -> dict:
        from kb.answering import answer_question

        return answer_question(
            stakeholder_id=self.stakeholder_id, prompt=self.prompt, limit=self.limit
        )

    def run(self) -> dict | None:
        """The checked answer (None for a refusal); AssertionError when it is wrong."""
        if self.refusal:
            try:
                answer = self.ask()
            except refusals() as exc:
                self.check(exc)
                return None
            raise AssertionError(f"answered instead of refused; {describe(answer)}")
        try:
            answer = self.ask()
        except refusals() as exc:
            raise AssertionError(f"refused instead of answered: {exc}") from None
        try:
            self.check(answer)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {describe(answer)}") from None
        return answer

    def outcome(self) -> tuple[str, dict | Exception]:
        """One of OUTCOMES, with the answer or the refusal it was judged on."""
        try:
            answer = self.ask()
        except refusals() as exc:
            if not self.refusal:
                return REFUSED, exc
            try:
                self.check(exc)
            except AssertionError:
                return REFUSED, exc  # a refusal, but not the one the case names
            return RIGHT, exc
        if not self.refusal:
            try:
                self.check(answer)
                return RIGHT, answer
            except AssertionError:
                pass
        interpretation = answer.get("interpretation") or {}
        said_so = interpretation.get("ignored") or interpretation.get("help")
        return (FLAGGED if said_so else SILENT), answer

    def check_policy_exact(self) -> None:
        """The answer, right or wrong, keeps to the asker's rows and masks and to the schema."""
        from kb.answers import ANSWER_JSON_SCHEMA

        answer = self.ask()
        assert_policy_exact(answer, self.stakeholder_id)
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.validate(json.loads(json.dumps(answer)), ANSWER_JSON_SCHEMA)


def refusals() -> tuple[type[Exception], ...]:
    """What the engine raises when it does not answer: a condition it cannot honour, or an asker
    who may not query."""
    from kb.policy import ConditionRefused, PolicyRefused

    return (ConditionRefused, PolicyRefused)


def params(cases: list[Case], known_misses: dict[str, str]) -> list:
    """One pytest param per case; a known miss is xfailed strictly, so a fix must remove it."""
    return [
        pytest.param(
            case,
            id=case.id,
            marks=[pytest.mark.xfail(strict=True, reason=known_misses[case.id])]
            if case.id in known_misses
            else [],
        )
        for case in cases
    ]


def describe(answer: dict) -> str:
    interpretation = answer.get("interpretation", {})
    return (
        f"plan={interpretation.get('plan')} understood={interpretation.get('understood')}"
        f" ignored={interpretation.get('ignored')} rows={answer.get('row_count')}"
    )


# --- the dataset, joined per asker (role-aware ages: hq computes them from the year) ---------


@cache
def customer_view(stakeholder_id: str) -> tuple[dict, ...]:
    year_only = role_of(stakeholder_id) == "hq_analyst"
    return tuple(
        {
            **c,
            "age": age(c["birth_date"], year_only=year_only),
            "birth_year": int(c["birth_date"][:4]),
        }
        for c in visible_customers(stakeholder_id)
    )


@cache
def contract_view(stakeholder_id: str) -> tuple[dict, ...]:
    customers = {c["customer_id"]: c for c in customer_view(stakeholder_id)}
    return tuple(
        {
            **customers[k["customer_id"]],
            **PRODUCTS[k["product_code"]],
            **k,
            "monthly_premium": int(k["monthly_premium"]),
            "sum_insured": int(k["sum_insured"]),
        }
        for k in visible_contracts(stakeholder_id)
    )


@cache
def payment_view(stakeholder_id: str) -> tuple[dict, ...]:
    contracts = {k["contract_id"]: k for k in contract_view(stakeholder_id)}
    rows = []
    for p in visible_payments(stakeholder_id):
        contract = contracts[p["contract_id"]]
        rows.append(
            {**contract, "contract_status": contract["status"], **p, "amount": int(p["amount"])}
        )
    return tuple(rows)


def in_force(contracts) -> tuple[dict, ...]:
    """The contracts a premium total or ranking counts when no status is asked for: the in-force
    ones (the catalogue's convention, kb.catalogue.in_force_by_default)."""
    return tuple(k for k in contracts if k["status"] == "유지")


def C(sid: str, pred=lambda c: True) -> frozenset[str]:  # noqa: N802
    return frozenset(c["customer_id"] for c in customer_view(sid) if pred(c))


def K(sid: str, pred=lambda k: True) -> frozenset[str]:  # noqa: N802
    return frozenset(k["contract_id"] for k in contract_view(sid) if pred(k))


def P(sid: str, pred=lambda p: True) -> frozenset[str]:  # noqa: N802
    return frozenset(p["payment_id"] for p in payment_view(sid) if pred(p))


def group(rows, key: str, value=None) -> dict:
    """group key -> count (value None) or sum of value(row)."""
    totals = Counter()
    for row in rows:
        totals[row[key]] += 1 if value is None else value(row)
    return dict(totals)


def same_either_way(inclusive: frozenset, exclusive: frozenset) -> frozenset:
    """For "이후/이전/after/before" whose boundary is debatable: the truth must not depend on it."""
    assert inclusive == exclusive, "pick an asker with no row on the boundary"
    return inclusive


# --- checks -------------------------------------------------------------------------------


def _columns(answer: dict) -> list[str]:
    return [c["name"] for c in answer["columns"]]


def rows_are(key: str, expected: frozenset, limit: int = 100):
    """The rows' key ids are the truth (or, when it exceeds the limit, `limit` rows of it)."""
    assert expected, "an empty truth checks nothing"

    def check(answer):
        assert key in _columns(answer), f"no {key} column in {_columns(answer)}"
        got = [row[key] for row in answer["rows"]]
        assert len(got) == len(set(got)), "duplicate rows"
        extra, missing = set(got) - expected, expected - set(got)
        if len(expected) <= limit:
            assert not extra and not missing, (
                f"extra {sorted(extra)[:8]} missing {sorted(missing)[:8]}"
            )
            assert answer["truncated"] is False, "truncated"
        else:
            assert not extra, f"extra {sorted(extra)[:8]}"
            assert len(got) == limit and answer["truncated"] is True, (
                f"{len(got)} rows of {len(expected)}, truncated={answer['truncated']}"
            )

    return check


def ranked(key: str, value_of: dict, n: int, *, descending: bool, measure: str | None = None):
    """The first n rows in the order of value_of (ties in any order); measure, if shown, exact."""
    want = sorted(value_of.values(), reverse=descending)[:n]

    def check(answer):
        assert key in _columns(answer), f"no {key} column in {_columns(answer)}"
        got = [row[key] for row in answer["rows"]]
        assert len(got) == len(set(got)) and set(got) <= set(value_of), f"rows {got}"
        assert [value_of[i] for i in got] == want, f"{got}: {[value_of[i] for i in got]} != {want}"
        if measure and measure in _columns(answer):
            assert all(row[measure] == value_of[row[key]] for row in answer["rows"]), measure

    return check


def grouped(key: str, expected: dict, measures=COUNT_COLUMNS):
    """A mapping group key -> number, the number found by its column name."""

    def check(answer):
        columns = _columns(answer)
        assert key in columns, f"no {key} column in {columns}"
        measure = next((m for m in measures if m in columns), None)
        assert measure, f"no {measures} column in {columns}"
        got = {row[key]: row[measure] for row in answer["rows"]}
        assert len(got) == len(answer["rows"]), "a group repeated"
        assert got == expected, f"got {got}, want {expected}"
        assert answer["truncated"] is False

    return check


def counted(key: str, expected: frozenset):
    """One count row equal to the count, or the rows themselves (their key ids the truth)."""
    assert expected

    def check(answer):
        columns, rows = _columns(answer), answer["rows"]
        count = next((c for c in COUNT_COLUMNS if c in columns), None)
        if count and len(rows) == 1 and key not in columns:
            assert rows[0][count] == len(expected), f"count {rows[0][count]} != {len(expected)}"
            return
        assert key in columns, f"neither a count row nor {key} rows: {columns}"
        got = {row[key] for row in rows}
        assert got == expected and len(rows) == len(expected), (
            f"{len(rows)} rows, want {len(expected)}: extra {sorted(got - expected)[:8]}"
        )
        assert answer["truncated"] is False

    return check


def nothing_visible():
    """No row, or a count of 0: what the asker may see holds nothing the question asks for (a
    question can narrow the asker's scope, never widen it)."""

    def check(answer):
        columns, rows = _columns(answer), answer["rows"]
        count = next((c for c in COUNT_COLUMNS if c in columns), None)
        if count and len(rows) == 1:
            assert rows[0][count] == 0, f"count {rows[0][count]}, want 0"
            return
        assert rows == [], f"{len(rows)} rows, want none"

    return check


def refused(*words: str, english: bool = False):
    """ConditionRefused, in the question's language, naming the condition."""

    def check(exc):
        message = getattr(exc, "message", "") or ""
        assert message, "a refusal without a message"
        if english:
            assert not HANGUL.search(message), f"not in English: {message}"
        else:
            assert HANGUL.search(message), f"not in Korean: {message}"
        assert any(w.lower() in message.lower() for w in words), f"{words} not in: {message}"

    return check


# --- the cases ------------------------------------------------------------------------------

CASES: list[Case] = []


def add(family: str, sid: str, prompt: str, check, *, limit: int = 100, refusal=False) -> None:
    assert family in FAMILIES
    number = sum(c.family == family for c in CASES) + 1
    CASES.append(Case(f"{family}-{number:02d}", family, sid, prompt, limit, check, refusal))


def cust(sid, pred=lambda c: True):
    return rows_are("customer_id", C(sid, pred))


def contr(sid, pred=lambda k: True):
    return rows_are("contract_id", K(sid, pred))


def pays(sid, pred=lambda p: True):
    return rows_are("payment_id", P(sid, pred))


def month_in(first: str, last: str):
    return lambda p: first <= p["due_month"] <= last


def unpaid_in(first: str, last: str):
    return lambda p: first <= p["due_month"] <= last and p["status"] == "미납"


def paid_totals(sid: str, *, paid_only: bool) -> dict:
    rows = [p for p in payment_view(sid) if p["status"] == "납입" or not paid_only]
    return group(rows, "customer_id", lambda p: p["amount"])


P1, P2, P3, P4, P5, P6, P7, P8 = (f"KB-P-00{n}" for n in range(1, 9))
M1, M2, M3, M4 = (f"KB-M-00{n}" for n in range(1, 5))
HQ = "KB-H-001"

# paraphrase: casual, polite, without spaces, with typos
add("paraphrase", P1, "담당고객목록보여줘", cust(P1))
add("paraphrase", P2, "제 고객 목록 좀 보여주세요", cust(P2))
add("paraphrase", M1, "우리 지점 고객 목록 알려주시겠어요?", cust(M1))
add("paraphrase", P3, "내 고겍 목록", cust(P3))
add("paraphrase", P4, "계악 목록 보여줘", contr(P4))
add("paraphrase", M2, "이번달 미납 보험로", pays(M2, unpaid_in("2026-06", "2026-06")))
add("paraphrase", HQ, "이번 달 미납 내역 좀 알려주세요", pays(HQ, unpaid_in("2026-06", "2026-06")))
add("paraphrase", P5, "고객님들 계약 현황 보여주실래요?", contr(P5))
add(
    "paraphrase",
    M3,
    "설계사별로 월보험료 합계 좀 알려줄래?",
    grouped(
        "planner_id",
        group(in_force(contract_view(M3)), "planner_id", lambda k: k["monthly_premium"]),
        ("total_monthly_premium",),
    ),
)
add(
    "paraphrase",
    HQ,
    "상품별 계약 건수 알려주시겠어요",
    grouped("product_code", group(contract_view(HQ), "product_code")),
)
add(
    "paraphrase",
    P1,
    "VIP고객유지계약",
    contr(P1, lambda k: k["grade"] == "VIP" and k["status"] == "유지"),
)
add(
    "paraphrase",
    HQ,
    "지점별보험료합계",
    grouped(
        "branch_id", group(payment_view(HQ), "branch_id", lambda p: p["amount"]), ("total_amount",)
    ),
)
add("paraphrase", P6, "유지계약목록", contr(P6, lambda k: k["status"] == "유지"))
add("paraphrase", M4, "우리지점 VIP 고객 좀 보여줘요", cust(M4, lambda c: c["grade"] == "VIP"))

# english
add("english", P1, "show my customers", cust(P1))
add("english", P2, "list my contracts", contr(P2))
add("english", M1, "unpaid premiums this month", pays(M1, unpaid_in("2026-06", "2026-06")))
add(
    "english",
    HQ,
    "number of customers by branch",
    grouped("branch_id", group(customer_view(HQ), "branch_id")),
)
add(
    "english",
    HQ,
    "contract count by product",
    grouped("product_code", group(contract_view(HQ), "product_code")),
)
add("english", M2, "VIP customers", cust(M2, lambda c: c["grade"] == "VIP"))
add("english", P3, "female customers", cust(P3, lambda c: c["gender"] == "F"))
add("english", M4, "active contracts", contr(M4, lambda k: k["status"] == "유지"))
add(
    "english",
    HQ,
    "total premiums by branch",
    grouped(
        "branch_id", group(payment_view(HQ), "branch_id", lambda p: p["amount"]), ("total_amount",)
    ),
)
add("english", P1, "customer C0001 details", cust(P1, lambda c: c["customer_id"] == "C0001"))
add("english", M3, "lapsed contracts", contr(M3, lambda k: k["status"] == "실효"))
add(
    "english",
    P4,
    "top 5 customers by premium",
    ranked(
        "customer_id", paid_totals(P4, paid_only=False), 5, descending=True, measure="total_amount"
    ),
)
add("english", HQ, "how many customers are there", counted("customer_id", C(HQ)))

# range: 이상 / 이하 / 미만 / 초과, amounts in 만원
add("range", P1, "월보험료 10만원 이상 계약", contr(P1, lambda k: k["monthly_premium"] >= 100_000))
add("range", HQ, "가입금액 5천만원 초과 계약", contr(HQ, lambda k: k["sum_insured"] > 50_000_000))
add("range", P2, "납입 금액 5만원 미만 납입 내역", pays(P2, lambda p: p["amount"] < 50_000))
add("range", P3, "월보험료 3만원 이하 계약", contr(P3, lambda k: k["monthly_premium"] <= 30_000))
add("range", M2, "월보험료 20만원 초과 계약", contr(M2, lambda k: k["monthly_premium"] > 200_000))
add(
    "range",
    HQ,
    "월보험료 200000원 이상 계약 수",
    counted("contract_id", K(HQ, lambda k: k["monthly_premium"] >= 200_000)),
)
add("range", P5, "가입금액 3000만원 이상 계약", contr(P5, lambda k: k["sum_insured"] >= 30_000_000))
add("range", M4, "가입금액 1억 이상 계약", contr(M4, lambda k: k["sum_insured"] >= 100_000_000))
add(
    "range",
    P6,
    "월보험료 5만원 이상 10만원 미만 계약",
    contr(P6, lambda k: 50_000 <= k["monthly_premium"] < 100_000),
)
add(
    "range",
    M3,
    "보험료 10만원 이상 미납 내역",
    pays(M3, lambda p: p["amount"] >= 100_000 and p["status"] == "미납"),
)
add(
    "range",
    P7,
    "contracts with monthly premium of at least 100000",
    contr(P7, lambda k: k["monthly_premium"] >= 100_000),
)
add(
    "range",
    M1,
    "contracts with monthly premium under 20000",
    contr(M1, lambda k: k["monthly_premium"] < 20_000),
)
add(
    "range",
    HQ,
    "가입금액 천만원 미만 계약 수",
    counted("contract_id", K(HQ, lambda k: k["sum_insured"] < 10_000_000)),
)

# age_birth: birth dates and ages -> birth_date (never joined_on)
add("age_birth", P1, "1987년생 고객 목록", rows_are("customer_id", frozenset({"C0001", "C0002"})))
add(
    "age_birth",
    P1,
    "생년월일이 1987-02-11인 고객",
    cust(P1, lambda c: c["birth_date"] == "1987-02-11"),
)
add(
    "age_birth",
    P2,
    "1990년 이후 출생한 고객",
    rows_are(
        "customer_id",
        same_either_way(
            C(P2, lambda c: c["birth_year"] >= 1990), C(P2, lambda c: c["birth_year"] > 1990)
        ),
    ),
)
add("age_birth", M1, "87년생 고객", cust(M1, lambda c: c["birth_year"] == 1987))
add("age_birth", P3, "80년대생 고객", cust(P3, lambda c: 1980 <= c["birth_year"] <= 1989))
add("age_birth", M2, "40세 이상 고객", cust(M2, lambda c: c["age"] >= 40))
add("age_birth", P4, "30대 고객", cust(P4, lambda c: 30 <= c["age"] <= 39))
add("age_birth", HQ, "30대 고객 수", counted("customer_id", C(HQ, lambda c: 30 <= c["age"] <= 39)))
add(
    "age_birth",
    P5,
    "customers born after 1990",
    rows_are(
        "customer_id",
        same_either_way(
            C(P5, lambda c: c["birth_year"] >= 1990), C(P5, lambda c: c["birth_year"] > 1990)
        ),
    ),
)
add("age_birth", M3, "customers born in 1978", cust(M3, lambda c: c["birth_year"] == 1978))
add("age_birth", P6, "50세 미만 고객", cust(P6, lambda c: c["age"] < 50))
add(
    "age_birth",
    P2,
    "1970년 이전 출생 고객",
    rows_are(
        "customer_id",
        same_either_way(
            C(P2, lambda c: c["birth_year"] < 1970), C(P2, lambda c: c["birth_year"] <= 1970)
        ),
    ),
)
add("age_birth", HQ, "40대 고객 수", counted("customer_id", C(HQ, lambda c: 40 <= c["age"] <= 49)))
add("age_birth", P7, "60대 고객", cust(P7, lambda c: 60 <= c["age"] <= 69))
add("age_birth", P8, "나이 45세 초과 고객", cust(P8, lambda c: c["age"] > 45))
add("age_birth", M4, "1990년대생 고객", cust(M4, lambda c: 1990 <= c["birth_year"] <= 1999))

# join_year: joining -> joined_on
add("join_year", P1, "2024년에 가입한 고객", cust(P1, lambda c: c["joined_on"][:4] == "2024"))
add("join_year", M1, "작년 가입 고객", cust(M1, lambda c: c["joined_on"][:4] == "2025"))
add(
    "join_year",
    HQ,
    "2025년 상반기 가입 고객",
    cust(HQ, lambda c: "2025-01-01" <= c["joined_on"] <= "2025-06-30"),
)
add(
    "join_year",
    P2,
    "customers who joined in 2023",
    cust(P2, lambda c: c["joined_on"][:4] == "2023"),
)
add("join_year", M2, "올해 가입한 고객", cust(M2, lambda c: c["joined_on"][:4] == "2026"))
add(
    "join_year",
    HQ,
    "2026년 가입 고객 수",
    counted("customer_id", C(HQ, lambda c: c["joined_on"][:4] == "2026")),
)
add(
    "join_year",
    P1,
    "2023년 이후 가입한 고객",
    rows_are(
        "customer_id",
        same_either_way(
            C(P1, lambda c: c["joined_on"] >= "2023"), C(P1, lambda c: c["joined_on"] >= "2024")
        ),
    ),
)
add(
    "join_year",
    P4,
    "2021년 이전에 가입한 고객",
    rows_are(
        "customer_id",
        same_either_way(
            C(P4, lambda c: c["joined_on"] < "2022"), C(P4, lambda c: c["joined_on"] < "2021")
        ),
    ),
)
add("join_year", P4, "2022년 가입 고객", cust(P4, lambda c: c["joined_on"][:4] == "2022"))
add(
    "join_year",
    HQ,
    "customers who joined last year",
    cust(HQ, lambda c: c["joined_on"][:4] == "2025"),
)
add(
    "join_year",
    M4,
    "2024년 하반기 가입 고객",
    cust(M4, lambda c: "2024-07-01" <= c["joined_on"] <= "2024-12-31"),
)
add(
    "join_year",
    M3,
    "2021년에 가입한 VIP 고객",
    cust(M3, lambda c: c["joined_on"][:4] == "2021" and c["grade"] == "VIP"),
)

# gender
add("gender", P1, "여성 고객", cust(P1, lambda c: c["gender"] == "F"))
add("gender", M1, "남성 고객 목록", cust(M1, lambda c: c["gender"] == "M"))
add("gender", HQ, "여자 고객 수", counted("customer_id", C(HQ, lambda c: c["gender"] == "F")))
add("gender", P2, "남자 고객", cust(P2, lambda c: c["gender"] == "M"))
add("gender", M2, "female customers", cust(M2, lambda c: c["gender"] == "F"))
add("gender", P3, "male customers", cust(P3, lambda c: c["gender"] == "M"))
add("gender", HQ, "성별 고객 수", grouped("gender", group(customer_view(HQ), "gender")))
add("gender", P4, "여성 VIP 고객", cust(P4, lambda c: c["gender"] == "F" and c["grade"] == "VIP"))
add("gender", M4, "남성 고객 수", counted("customer_id", C(M4, lambda c: c["gender"] == "M")))
add(
    "gender",
    HQ,
    "how many men customers",
    counted("customer_id", C(HQ, lambda c: c["gender"] == "M")),
)
add("gender", M3, "성별 계약 건수", grouped("gender", group(contract_view(M3), "gender")))

# grade (the data has two grades: VIP and 일반)
add("grade", P1, "VIP 고객", cust(P1, lambda c: c["grade"] == "VIP"))
add("grade", M1, "일반 고객 목록", cust(M1, lambda c: c["grade"] == "일반"))
add("grade", HQ, "VIP 고객 수", counted("customer_id", C(HQ, lambda c: c["grade"] == "VIP")))
add("grade", P2, "일반등급 고객", cust(P2, lambda c: c["grade"] == "일반"))
add("grade", M2, "등급별 고객 수", grouped("grade", group(customer_view(M2), "grade")))
add("grade", HQ, "등급별 계약 건수", grouped("grade", group(contract_view(HQ), "grade")))
add("grade", P3, "VIP 고객 전화번호 목록", cust(P3, lambda c: c["grade"] == "VIP"))
add("grade", M3, "vip 고객 목록", cust(M3, lambda c: c["grade"] == "VIP"))
add("grade", P4, "등급이 VIP인 고객", cust(P4, lambda c: c["grade"] == "VIP"))
add("grade", M4, "일반 고객 수", counted("customer_id", C(M4, lambda c: c["grade"] == "일반")))
add(
    "grade",
    HQ,
    "등급별 월보험료 합계",
    grouped(
        "grade",
        group(in_force(contract_view(HQ)), "grade", lambda k: k["monthly_premium"]),
        ("total_monthly_premium",),
    ),
)
add("grade", P5, "VIP 등급 고객의 수", counted("customer_id", C(P5, lambda c: c["grade"] == "VIP")))

# status: contracts 유지/실효/해지/만기, payments 납입/미납
add("status", P1, "유지 계약", contr(P1, lambda k: k["status"] == "유지"))
add("status", M1, "실효 계약 목록", contr(M1, lambda k: k["status"] == "실효"))
add("status", HQ, "해지 계약", contr(HQ, lambda k: k["status"] == "해지"))
add("status", P2, "만기 계약", contr(P2, lambda k: k["status"] == "만기"))
add("status", M2, "상태별 계약 건수", grouped("status", group(contract_view(M2), "status")))
add("status", HQ, "미납 건수", counted("payment_id", P(HQ, lambda p: p["status"] == "미납")))
add("status", P3, "납입 완료 내역", pays(P3, lambda p: p["status"] == "납입"))
add(
    "status",
    M3,
    "이번 달 납입 완료 내역",
    pays(M3, lambda p: p["due_month"] == "2026-06" and p["status"] == "납입"),
)
add("status", P4, "해지된 계약", contr(P4, lambda k: k["status"] == "해지"))
add("status", HQ, "만기된 계약 수", counted("contract_id", K(HQ, lambda k: k["status"] == "만기")))
add(
    "status", M4, "실효된 계약 건수", counted("contract_id", K(M4, lambda k: k["status"] == "실효"))
)
add("status", P5, "미납 내역", pays(P5, lambda p: p["status"] == "미납"))
add("status", HQ, "납입 상태별 건수", grouped("status", group(payment_view(HQ), "status")))

# negation: the complement within the asker's visible rows
add(
    "negation",
    P1,
    "자동차보험을 제외한 계약 목록",
    contr(P1, lambda k: k["product_code"] != "AUTO-01"),
)
add("negation", M1, "VIP 말고 고객", cust(M1, lambda c: c["grade"] != "VIP"))
add("negation", P2, "유지 아닌 계약", contr(P2, lambda k: k["status"] != "유지"))
add("negation", M2, "강남지점 이외 고객", cust(M2, lambda c: c["branch_id"] != "BR-GN"))
add(
    "negation",
    HQ,
    "강남지점 이외 고객 수",
    counted("customer_id", C(HQ, lambda c: c["branch_id"] != "BR-GN")),
)
add("negation", P3, "건강 빼고 계약", contr(P3, lambda k: k["category"] != "건강"))
add("negation", P4, "contracts except auto", contr(P4, lambda k: k["category"] != "자동차"))
add("negation", M3, "customers other than VIP", cust(M3, lambda c: c["grade"] != "VIP"))
add("negation", HQ, "contracts not active", contr(HQ, lambda k: k["status"] != "유지"))
add("negation", P5, "excluding lapsed contracts", contr(P5, lambda k: k["status"] != "실효"))
add("negation", M4, "해지 제외 계약", contr(M4, lambda k: k["status"] != "해지"))
add(
    "negation", HQ, "VIP 제외 고객 수", counted("customer_id", C(HQ, lambda c: c["grade"] != "VIP"))
)
add("negation", P6, "KB암보험 빼고 계약", contr(P6, lambda k: k["product_code"] != "HLTH-02"))
add(
    "negation",
    M1,
    "이번 달 미납 제외 납입 내역",
    pays(M1, lambda p: p["due_month"] == "2026-06" and p["status"] != "미납"),
)
add("negation", P7, "여성 제외 고객", cust(P7, lambda c: c["gender"] != "F"))
add(
    "negation",
    HQ,
    "종로지점 말고 지점별 고객 수",
    grouped(
        "branch_id", group([c for c in customer_view(HQ) if c["branch_id"] != "BR-JR"], "branch_id")
    ),
)
add(
    "negation",
    M2,
    "만기 아닌 계약 건수",
    counted("contract_id", K(M2, lambda k: k["status"] != "만기")),
)

# cross_entity: a condition on one entity, rows of another
add("cross_entity", P1, "VIP 고객의 계약", contr(P1, lambda k: k["grade"] == "VIP"))
add(
    "cross_entity",
    M1,
    "미납이 있는 고객",
    rows_are(
        "customer_id",
        frozenset(p["customer_id"] for p in payment_view(M1) if p["status"] == "미납"),
    ),
)
add(
    "cross_entity",
    P2,
    "여성 고객의 유지 계약",
    contr(P2, lambda k: k["gender"] == "F" and k["status"] == "유지"),
)
add("cross_entity", M2, "30대 고객의 계약", contr(M2, lambda k: 30 <= k["age"] <= 39))
add(
    "cross_entity",
    HQ,
    "VIP 고객의 해지 계약",
    contr(HQ, lambda k: k["grade"] == "VIP" and k["status"] == "해지"),
)
add(
    "cross_entity",
    P3,
    "남성 고객의 미납 내역",
    pays(P3, lambda p: p["gender"] == "M" and p["status"] == "미납"),
)
add(
    "cross_entity",
    M3,
    "2024년에 가입한 고객의 계약",
    contr(M3, lambda k: k["joined_on"][:4] == "2024"),
)
add("cross_entity", HQ, "1987년생 고객의 계약", contr(HQ, lambda k: k["birth_year"] == 1987))
add(
    "cross_entity",
    P4,
    "VIP 고객의 이번 달 납입 내역",
    pays(P4, lambda p: p["grade"] == "VIP" and p["due_month"] == "2026-06"),
)
add(
    "cross_entity",
    M4,
    "자동차보험 계약이 있는 고객",
    rows_are(
        "customer_id",
        frozenset(k["customer_id"] for k in contract_view(M4) if k["product_code"] == "AUTO-01"),
    ),
)
add(
    "cross_entity",
    P5,
    "이번 달 미납이 있는 고객 목록",
    rows_are(
        "customer_id",
        frozenset(p["customer_id"] for p in payment_view(P5) if unpaid_in("2026-06", "2026-06")(p)),
    ),
)
add(
    "cross_entity",
    HQ,
    "active contracts of VIP customers",
    contr(HQ, lambda k: k["grade"] == "VIP" and k["status"] == "유지"),
)
add(
    "cross_entity",
    M1,
    "실효 계약이 있는 고객",
    rows_are(
        "customer_id",
        frozenset(k["customer_id"] for k in contract_view(M1) if k["status"] == "실효"),
    ),
)
add(
    "cross_entity",
    HQ,
    "40대 여성 고객의 계약 건수",
    counted("contract_id", K(HQ, lambda k: 40 <= k["age"] <= 49 and k["gender"] == "F")),
)

# ranking: sequences in a well-defined order (ties in any order)
add(
    "ranking",
    P1,
    "가장 최근에 가입한 5명",
    ranked(
        "customer_id",
        {c["customer_id"]: c["joined_on"] for c in customer_view(P1)},
        5,
        descending=True,
    ),
)
add(
    "ranking",
    P2,
    "월보험료 상위 3건 계약",
    ranked(
        "contract_id",
        {k["contract_id"]: k["monthly_premium"] for k in contract_view(P2)},
        3,
        descending=True,
        measure="monthly_premium",
    ),
)
add(
    "ranking",
    M1,
    "보험료 많이 낸 고객 top 5",
    ranked(
        "customer_id", paid_totals(M1, paid_only=True), 5, descending=True, measure="total_amount"
    ),
)
add(
    "ranking",
    HQ,
    "가장 오래된 계약 3건",
    ranked(
        "contract_id",
        {k["contract_id"]: k["start_date"] for k in contract_view(HQ)},
        3,
        descending=False,
    ),
)
add(
    "ranking",
    P3,
    "월보험료가 가장 높은 계약 1건",
    ranked(
        "contract_id",
        {k["contract_id"]: k["monthly_premium"] for k in contract_view(P3)},
        1,
        descending=True,
    ),
)
add(
    "ranking",
    M2,
    "가입금액 상위 5건 계약",
    ranked(
        "contract_id",
        {k["contract_id"]: k["sum_insured"] for k in contract_view(M2)},
        5,
        descending=True,
        measure="sum_insured",
    ),
)
add(
    "ranking",
    HQ,
    "가장 최근에 가입한 고객 10명",
    ranked(
        "customer_id",
        {c["customer_id"]: c["joined_on"] for c in customer_view(HQ)},
        10,
        descending=True,
    ),
)
add(
    "ranking",
    P4,
    "나이가 가장 많은 고객 3명",
    ranked(
        "customer_id",
        {c["customer_id"]: c["age"] for c in customer_view(P4)},
        3,
        descending=True,
    ),
)
add(
    "ranking",
    M3,
    "가장 젊은 고객 3명",
    ranked(
        "customer_id",
        {c["customer_id"]: c["age"] for c in customer_view(M3)},
        3,
        descending=False,
    ),
)
add(
    "ranking",
    P5,
    "top 3 contracts by monthly premium",
    ranked(
        "contract_id",
        {k["contract_id"]: k["monthly_premium"] for k in contract_view(P5)},
        3,
        descending=True,
    ),
)
add(
    "ranking",
    M4,
    "가입한 지 가장 오래된 고객 3명",
    ranked(
        "customer_id",
        {c["customer_id"]: c["joined_on"] for c in customer_view(M4)},
        3,
        descending=False,
    ),
)
add(
    "ranking",
    HQ,
    "월보험료 하위 3건 계약",
    ranked(
        "contract_id",
        {k["contract_id"]: k["monthly_premium"] for k in contract_view(HQ)},
        3,
        descending=False,
    ),
)
add(
    "ranking",
    M2,
    "미납 건수가 가장 많은 고객 3명",
    ranked(
        "customer_id",
        group([p for p in payment_view(M2) if p["status"] == "미납"], "customer_id"),
        3,
        descending=True,
        measure="count",
    ),
)

# period: relative to the as-of date 2026-06-30
add("period", P1, "지난달 납입 내역", pays(P1, month_in("2026-05", "2026-05")))
add("period", M1, "상반기 미납 내역", pays(M1, unpaid_in("2026-01", "2026-06")))
add("period", P2, "최근 6개월 납입 내역", pays(P2, month_in("2026-01", "2026-06")))
add("period", HQ, "작년 미납 건수", counted("payment_id", P(HQ, unpaid_in("2025-01", "2025-12"))))
add("period", M2, "이번 달 보험료 납입 내역", pays(M2, month_in("2026-06", "2026-06")))
add("period", P3, "올해 미납 내역", pays(P3, unpaid_in("2026-01", "2026-12")))
add("period", HQ, "지난달 미납 내역", pays(HQ, unpaid_in("2026-05", "2026-05")))
add("period", M3, "작년 12월 납입 내역", pays(M3, month_in("2025-12", "2025-12")))
add(  # some contracts start after the as-of date: this asker has none, so 올해 is unambiguous
    "period",
    P5,
    "올해 시작된 계약",
    rows_are(
        "contract_id",
        same_either_way(
            K(P5, lambda k: k["start_date"][:4] == "2026"),
            K(P5, lambda k: "2026-01-01" <= k["start_date"] <= "2026-06-30"),
        ),
    ),
)
add("period", M4, "last month's unpaid premiums", pays(M4, unpaid_in("2026-05", "2026-05")))
add(
    "period",
    HQ,
    "월별 미납 건수",
    grouped(
        "due_month", group([p for p in payment_view(HQ) if p["status"] == "미납"], "due_month")
    ),
)
add("period", P6, "최근 3개월 미납 내역", pays(P6, unpaid_in("2026-04", "2026-06")))
add(
    "period",
    HQ,
    "작년 하반기 미납 건수",
    counted("payment_id", P(HQ, unpaid_in("2025-07", "2025-12"))),
)
add(
    "period",
    M1,
    "올해 월별 보험료 합계",
    grouped(
        "due_month",
        group(
            [p for p in payment_view(M1) if p["due_month"] >= "2026-01"],
            "due_month",
            lambda p: p["amount"],
        ),
        ("total_amount",),
    ),
)

# masked: a condition on a column the asker does not see in full is refused ...
add("masked", HQ, "주민번호가 87로 시작하는 고객 수", refused("주민"), refusal=True)
add("masked", HQ, "전화번호가 010-8962로 시작하는 고객", refused("전화"), refusal=True)
add("masked", HQ, "생년월일이 1987-02-11인 고객", refused("생년월일"), refusal=True)
add("masked", P1, "주민번호 뒷자리가 2로 시작하는 고객", refused("주민"), refusal=True)
add("masked", HQ, "고객 이름이 신으로 시작하는 고객 수", refused("고객명", "이름"), refusal=True)
add("masked", M1, "전화번호가 010-8962로 시작하는 고객", refused("전화"), refusal=True)
add("masked", M2, "주민등록번호가 900101로 시작하는 고객", refused("주민"), refusal=True)
add(
    "masked",
    HQ,
    "customers whose phone number starts with 010-8962",
    refused("phone", english=True),
    refusal=True,
)
add("masked", HQ, "customers born on 1987-02-11", refused("birth", english=True), refusal=True)
add("masked", HQ, "생일이 2월 11일인 고객", refused("생년월일", "생일"), refusal=True)
add(
    "masked",
    M3,
    "customers whose rrn starts with 87",
    refused("rrn", "resident", "registration", english=True),
    refusal=True,
)
# ... and one the asker sees (hq sees the birth year; a planner sees phones in full) is answered.
add(
    "masked",
    HQ,
    "1987년생 고객 수",
    counted("customer_id", C(HQ, lambda c: c["birth_year"] == 1987)),
)
add(
    "masked",
    HQ,
    "1990년 이후 출생한 고객 수",
    counted("customer_id", C(HQ, lambda c: c["birth_year"] >= 1990)),  # 이후: 1990 included
)
add("masked", HQ, "60세 이상 고객 수", counted("customer_id", C(HQ, lambda c: c["age"] >= 60)))
add(
    "masked",
    P1,
    "전화번호가 010-8962로 시작하는 고객",
    cust(P1, lambda c: c["phone"].startswith("010-8962")),
)


def by_family() -> dict[str, list[Case]]:
    families = {family: [] for family in FAMILIES}
    for case in CASES:
        families[case.family].append(case)
    return families
