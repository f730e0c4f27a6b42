"""The third held-out Select AI set: questions written the way planners, branch managers and
head-office analysts type them to an assistant, by people who had not read the question reader.

It covers wording the earlier sets touch lightly: compound amounts in digits and Hangul (천오백만,
3만5천, 1.2억, "딱 5만원", 30k, 1.5M), comparatives and negations around numbers and dates (넘지
않는, 안 되는, 밑으로, at most, and up, since, before), periods (1분기, H1, 하반기, YTD, since
March, 지난달), money received (납입/들어온/받은 = paid rows only; 미납/outstanding = unpaid rows),
everyday verbs and honorifics (살아있는 계약, 만기 끝난, 몇 분 계세요, 어르신, 이름에 '민'),
groupings (지점마다, 연도별, 지역별, 계약 2건 이상), texting English (custmers, premuim, r, u,
pls), birthdays with a day (2월 11일생, 1987.02.11생, born on 3 March), refusals (data the KB does
not hold, conditions on a column the asker sees masked) and several of these at once.

Every truth is computed from the CSV files with the suite's helpers (tests.kb.selectai_suite,
tests.kb.truth), never through the code under test. Where a careful reader could take a question
two ways (a period by due month or by paid date, an inclusive or exclusive bound, contracts of
every status or in force only), the asker is one for whom both readings give the same truth
(`same_either_way`, `ranked_same`), or the question names the reading itself.
"""

from __future__ import annotations

from collections import Counter

from tests.kb.selectai_heldout2 import grouped_near, number_is
from tests.kb.selectai_suite import (  # noqa: F401  (the cases below use these)
    COUNT_COLUMNS,
    HQ,
    M1,
    M2,
    M3,
    M4,
    P1,
    P2,
    P3,
    P4,
    P5,
    P6,
    P7,
    P8,
    C,
    Case,
    K,
    P,
    contr,
    contract_view,
    counted,
    cust,
    customer_view,
    group,
    grouped,
    month_in,
    paid_totals,
    payment_view,
    pays,
    ranked,
    refused,
    rows_are,
    same_either_way,
    unpaid_in,
)
from tests.kb.truth import BRANCHES

FAMILIES = (
    "amounts",  # 천오백만, 3만5천, 오십만, 1.2억, 딱 5만원, 30k, 1.5M, twenty-five thousand
    "comparisons",  # 넘지 않는, 안 되는, 밑으로, 까지, 전에, 이후; at most, and up, since, before
    "periods",  # 1분기, Q2, H1, 하반기, YTD, since March, 작년, 올해, 지난달 (as of 2026-06-30)
    "money_received",  # 납입/들어온/받은/collected = paid rows; 미납/unpaid/outstanding = unpaid
    "everyday",  # 살아있는 계약, 만기 끝난, 해지 들어간, 몇 분 계세요, 어르신, 이름에 '민'
    "grouping",  # 지점마다, 상품별, 연도별, 월별, 지역별, per branch, 계약 2건 이상 가진 고객
    "casual_english",  # pls, r, u, custmers, premuim, unpayed, priciest, ppl, lowercase
    "birthdays",  # a birth day with or without the year; the head office sees the year only
    "refusals",  # data the KB does not hold; conditions on a column the asker sees masked
    "mixed",  # several of the above at once
)

CASES: list[Case] = []


def add(family: str, sid: str, prompt: str, check, *, limit: int = 100, refusal=False) -> None:
    assert family in FAMILIES, family
    number = sum(c.family == family for c in CASES) + 1
    case_id = f"heldout3-{family}-{number:02d}"
    CASES.append(Case(case_id, family, sid, prompt, limit, check, refusal))


def by_family() -> dict[str, list[Case]]:
    families: dict[str, list[Case]] = {family: [] for family in FAMILIES}
    for case in CASES:
        families[case.family].append(case)
    return families


# --- helpers ------------------------------------------------------------------------------

AS_OF = "2026-06-30"
Q1, Q2, H1 = ("2026-01", "2026-03"), ("2026-04", "2026-06"), ("2026-01", "2026-06")
JUNE, MAY = ("2026-06", "2026-06"), ("2026-05", "2026-05")
LAST_H2, LAST_Q3, LAST_Q4 = ("2025-07", "2025-12"), ("2025-07", "2025-09"), ("2025-10", "2025-12")
LAST_YEAR = ("2025-01", "2025-12")  # the payment rows cover 2025-07 .. 2026-06

NAME = ("고객명", "이름", "성명")
RRN = ("주민", "주민등록번호")
PHONE = ("전화", "휴대폰", "핸드폰", "연락처")
BIRTH_KO = refused("생년월일", "생일")
BIRTH_EN = refused("birth", english=True)


def paid(p) -> bool:
    return p["status"] == "납입"


def unpaid(p) -> bool:
    return p["status"] == "미납"


def is_(column: str, *values: str):
    return lambda r: r[column] in values


ACTIVE = is_("status", "유지")
VIP = is_("grade", "VIP")


def both(*preds):
    return lambda r: all(pred(r) for pred in preds)


def customers_with(rows, pred=lambda r: True) -> frozenset[str]:
    """The customer ids of the contract or payment rows that satisfy pred."""
    return frozenset(r["customer_id"] for r in rows if pred(r))


def holders(sid: str, at_least: int, pred=lambda k: True, keep=lambda c: True) -> frozenset[str]:
    """The asker's customers (satisfying keep) with at least `at_least` contracts satisfying pred,
    counted over the customer's own contract rows."""
    counts = Counter(k["customer_id"] for k in contract_view(sid) if pred(k))
    return C(sid, lambda c: counts[c["customer_id"]] >= at_least and keep(c))


def received(sid: str, first: str, last: str, pred=lambda p: True) -> frozenset[str]:
    """Paid rows "received" in the months first..last: by due month and by paid date alike (the
    askers are chosen so that both readings hold the same rows)."""
    by_due = P(sid, lambda p: paid(p) and first <= p["due_month"] <= last and pred(p))
    by_paid_date = P(sid, lambda p: paid(p) and first <= p["paid_date"][:7] <= last and pred(p))
    return same_either_way(by_due, by_paid_date)


def amount_of(sid: str, ids: frozenset[str]) -> int:
    return sum(p["amount"] for p in payment_view(sid) if p["payment_id"] in ids)


def total(rows, value) -> int:
    return sum(value(r) for r in rows)


def mean(values) -> float:
    values = list(values)
    assert values, "an empty truth checks nothing"
    return sum(values) / len(values)


def born_on(month: int, day: int):
    return lambda c: c["birth_date"][5:] == f"{month:02d}-{day:02d}"


def name_has(text: str):
    return lambda r: text in r["customer_name"]


def aged(low: int, high: int = 200):
    return lambda r: low <= r["age"] <= high


def premium(test):
    return lambda k: test(k["monthly_premium"])


def insured(test):
    return lambda k: test(k["sum_insured"])


def amount(test):
    return lambda p: test(p["amount"])


def ranked_same(key: str, first: dict, second: dict, n: int, *, descending: bool, measure=None):
    """ranked() where two readings (say every status, or in force only) give the same first n,
    with no tie across the n-th place in either."""

    def top(values: dict) -> list:
        order = sorted(values.items(), key=lambda kv: kv[1], reverse=descending)
        if len(order) > n:
            assert order[n - 1][1] != order[n][1], "a tie across the cut"
        return order[:n]

    assert sorted(top(first)) == sorted(top(second)), "the readings differ: pick another asker"
    return ranked(key, first, n, descending=descending, measure=measure)


def grouped_by_value(expected: dict, measures=COUNT_COLUMNS):
    """A grouping whose key column the question does not name (a year, a region): some column's
    values, as text without a trailing 년, are exactly the truth's keys, each with its number."""
    assert expected, "an empty truth checks nothing"

    def check(answer):
        columns = [c["name"] for c in answer["columns"]]
        measure = next((m for m in measures if m in columns), None)
        assert measure, f"no {measures} column in {columns}"
        rows = answer["rows"]
        for column in columns:
            if column == measure:
                continue
            got = {str(row[column]).removesuffix("년"): row[measure] for row in rows}
            if len(got) == len(rows) and got == expected:
                assert answer["truncated"] is False
                return
        raise AssertionError(f"no column groups as {expected}: {columns}")

    return check


def paid_over(sid: str, floor: int, pred) -> frozenset[str]:
    """Customers whose paid rows satisfying pred add up to more than `floor`."""
    totals = group(
        [p for p in payment_view(sid) if paid(p) and pred(p)], "customer_id", lambda p: p["amount"]
    )
    return frozenset(cid for cid, amount_paid in totals.items() if amount_paid > floor)


def year_counts(rows, date_field: str) -> dict[str, int]:
    return dict(Counter(r[date_field][:4] for r in rows))


REGION = {b: branch["region"] for b, branch in BRANCHES.items()}  # 서울 (강남, 종로), 부산, 대전


def future_ends(sid: str, pred=lambda k: True) -> dict[str, str]:
    """contract_id -> end_date for contracts maturing on or after the as-of date."""
    return {
        k["contract_id"]: k["end_date"]
        for k in contract_view(sid)
        if k["end_date"] >= AS_OF and pred(k)
    }


def premiums(sid: str, pred=lambda k: True) -> dict[str, int]:
    return {k["contract_id"]: k["monthly_premium"] for k in contract_view(sid) if pred(k)}


# --- amounts: compound amounts in digits and Hangul, English numbers ------------------------
add(
    "amounts",
    P2,
    "가입금액 천오백만원 이상인 계약 보여줘",
    contr(P2, insured(lambda v: v >= 15_000_000)),
)
add(
    "amounts",
    M1,
    "월 보험료 3만5천원 이상 계약 몇 건이야?",
    counted("contract_id", K(M1, premium(lambda v: v >= 35_000))),
)
add(
    "amounts",
    HQ,
    "금액이 딱 5만원인 납입 내역 몇 건?",
    counted("payment_id", P(HQ, amount(lambda v: v == 50_000))),
)
add("amounts", P1, "월보험료가 정확히 5만원인 계약", contr(P1, premium(lambda v: v == 50_000)))
add("amounts", P3, "매달 꼭 3만원 내는 계약 있어?", contr(P3, premium(lambda v: v == 30_000)))
add(
    "amounts",
    HQ,
    "가입금액 1.2억 넘는 계약 몇 건이에요",
    counted("contract_id", K(HQ, insured(lambda v: v > 120_000_000))),
)
add(
    "amounts",
    HQ,
    "가입금액 7천5백만 이상 계약 목록",
    contr(HQ, insured(lambda v: v >= 75_000_000)),
)
add(
    "amounts",
    M3,
    "월보험료 오십만원 미만인 계약 수",
    counted("contract_id", K(M3, premium(lambda v: v < 500_000))),
)
add(
    "amounts",
    P4,
    "월 보험료 150,000원 넘는 계약",
    contr(P4, premium(lambda v: v > 150_000)),
)
add(
    "amounts",
    M2,
    "가입금액이 2천만원 이하인 계약 목록 주세요",
    contr(M2, insured(lambda v: v <= 20_000_000)),
)
add(
    "amounts",
    P1,
    "월 삼만오천원씩 내는 계약",
    contr(P1, premium(lambda v: v == 35_000)),
)
add(
    "amounts",
    M4,
    "칠만원 넘게 내는 계약 몇 개예요?",
    counted("contract_id", K(M4, premium(lambda v: v > 70_000))),
)
add(
    "amounts",
    P8,
    "가입금액 1,000만원 이상 계약",
    contr(P8, insured(lambda v: v >= 10_000_000)),
)
add(
    "amounts",
    M3,
    "월 만원짜리 계약 보여줘",
    contr(M3, premium(lambda v: v == 10_000)),
)
add(
    "amounts",
    HQ,
    "월보험료 10만원 이상 24만원 이하 계약 건수",
    counted("contract_id", K(HQ, premium(lambda v: 100_000 <= v <= 240_000))),
)
add(
    "amounts",
    M2,
    "3만5천원짜리 미납 내역",
    pays(M2, lambda p: unpaid(p) and p["amount"] == 35_000),
)
add(
    "amounts",
    P2,
    "contracts with a monthly premium over 30k",
    contr(P2, premium(lambda v: v > 30_000)),
)
add(
    "amounts",
    P5,
    "show contracts where the sum insured is at least 1.5M",
    contr(P5, insured(lambda v: v >= 1_500_000)),
)
add(
    "amounts",
    M4,
    "how many payments of exactly 25,000 won are there",
    counted("payment_id", P(M4, amount(lambda v: v == 25_000))),
)
add(
    "amounts",
    P6,
    "contracts with a monthly premium of twenty-five thousand won or more",
    contr(P6, premium(lambda v: v >= 25_000)),
)
add(
    "amounts",
    P7,
    "contracts with a sum insured of two million won or less",
    contr(P7, insured(lambda v: v <= 2_000_000)),
)
add(
    "amounts",
    P3,
    "payments under 20k",
    pays(P3, amount(lambda v: v < 20_000)),
)
add(
    "amounts",
    M1,
    "contracts insured for more than 40,000,000 won",
    contr(M1, insured(lambda v: v > 40_000_000)),
)
add(
    "amounts",
    HQ,
    "how many contracts have a sum insured of 1 million or more but less than 2 million",
    counted("contract_id", K(HQ, insured(lambda v: 1_000_000 <= v < 2_000_000))),
)

# --- comparisons: comparatives and negations around numbers, ages and dates ------------------
add(
    "comparisons",
    P1,
    "월보험료 5만원 넘지 않는 계약",
    contr(P1, premium(lambda v: v <= 50_000)),
)
add(
    "comparisons",
    M2,
    "가입금액 1억 안 되는 계약 건수",
    counted("contract_id", K(M2, insured(lambda v: v < 100_000_000))),
)
add(
    "comparisons",
    P3,
    "월보험료 2만원 밑으로 내는 계약",
    contr(P3, premium(lambda v: v < 20_000)),
)
add(
    "comparisons",
    HQ,
    "월보험료 1만5천원까지인 계약 몇 건?",
    counted("contract_id", K(HQ, premium(lambda v: v <= 15_000))),
)
add(
    "comparisons",
    P4,
    "2024년 전에 가입한 고객",
    cust(P4, lambda c: c["joined_on"] < "2024-01-01"),
)
add(
    "comparisons",
    M3,
    "만기일이 2030년 이후인 계약",
    contr(M3, lambda k: k["end_date"] >= "2030-01-01"),
)
add(
    "comparisons",
    HQ,
    "65세 이상 고객은 몇 명입니까",
    counted("customer_id", C(HQ, aged(65))),
)
add("comparisons", P2, "나이가 40 넘는 고객", cust(P2, lambda c: c["age"] > 40))
add(
    "comparisons",
    M3,
    "2025년 7월 이후에 가입한 고객",
    rows_are(  # from July or from August: M3 has nobody who joined in July 2025
        "customer_id",
        same_either_way(
            C(M3, lambda c: c["joined_on"] >= "2025-07-01"),
            C(M3, lambda c: c["joined_on"] >= "2025-08-01"),
        ),
    ),
)
add(
    "comparisons",
    P1,
    "만기가 2027년까지인 계약 보여줘",
    contr(P1, lambda k: k["end_date"] <= "2027-12-31"),
)
add(
    "comparisons",
    P2,
    "2025년 이후에 시작된 계약",
    contr(P2, lambda k: k["start_date"] >= "2025-01-01"),
)
add(
    "comparisons",
    M4,
    "월보험료 10만원 초과인 유지 계약",
    contr(M4, lambda k: k["monthly_premium"] > 100_000 and ACTIVE(k)),
)
add(
    "comparisons",
    HQ,
    "2019년 전에 시작된 계약 수",
    counted("contract_id", K(HQ, lambda k: k["start_date"] < "2019-01-01")),
)
add(
    "comparisons",
    HQ,
    "1985년 이후 출생한 VIP 고객 수",
    counted("customer_id", C(HQ, lambda c: c["birth_year"] >= 1985 and VIP(c))),
)
add(
    "comparisons",
    P8,
    "미납 금액이 4만원 이상인 미납 건",
    pays(P8, lambda p: unpaid(p) and p["amount"] >= 40_000),
)
add("comparisons", P5, "customers 50 and up", cust(P5, aged(50)))
add(
    "comparisons",
    P6,
    "계약일이 2022년보다 앞선 계약",
    contr(P6, lambda k: k["start_date"] < "2022-01-01"),
)
add(
    "comparisons",
    M4,
    "customers who joined since 2025",
    cust(M4, lambda c: c["joined_on"] >= "2025-01-01"),
)
add(
    "comparisons",
    P7,
    "contracts with a monthly premium of no more than 20,000",
    contr(P7, premium(lambda v: v <= 20_000)),
)
add(
    "comparisons",
    M1,
    "contracts with a sum insured of at most 5 million",
    contr(M1, insured(lambda v: v <= 5_000_000)),
)
add("comparisons", P8, "35살 안 된 고객", cust(P8, lambda c: c["age"] < 35))
add("comparisons", HQ, "customers older than 70", cust(HQ, lambda c: c["age"] > 70))
add(
    "comparisons",
    P3,
    "unpaid payments of more than 100,000 won",
    pays(P3, lambda p: unpaid(p) and p["amount"] > 100_000),
)
add(
    "comparisons",
    P4,
    "customers born before 1970",
    cust(P4, lambda c: c["birth_date"] < "1970-01-01"),
)

# --- periods: quarters, halves, YTD, relative to 2026-06-30 --------------------------------
add("periods", HQ, "1분기 미납 건수", counted("payment_id", P(HQ, unpaid_in(*Q1))))
add("periods", P7, "작년 4분기 납입 내역", pays(P7, month_in(*LAST_Q4)))
add("periods", P2, "작년 하반기 보험료 미납 내역", pays(P2, unpaid_in(*LAST_H2)))
add("periods", P3, "3월부터 미납된 내역 보여줘", pays(P3, unpaid_in("2026-03", "2026-06")))
add(
    "periods",
    M3,
    "올해 들어 가입한 고객 몇 명이야",
    counted("customer_id", C(M3, lambda c: c["joined_on"].startswith("2026"))),
)
add("periods", P5, "작년에 시작한 계약", contr(P5, lambda k: k["start_date"].startswith("2025")))
add("periods", M4, "지난달 미납 몇 건?", counted("payment_id", P(M4, unpaid_in(*MAY))))
add(
    "periods",
    HQ,
    "만기일이 올해인 계약 수",
    counted("contract_id", K(HQ, lambda k: k["end_date"].startswith("2026"))),
)
add(
    "periods",
    P6,
    "2분기에 시작된 계약",
    contr(P6, lambda k: "2026-04-01" <= k["start_date"] <= "2026-06-30"),
)
add(
    "periods",
    HQ,
    "2025년 3분기 미납 건수",
    counted("payment_id", P(HQ, unpaid_in(*LAST_Q3))),
)
add("periods", P6, "지난 분기 납입 내역 보여줘", pays(P6, month_in(*Q1)))
add(
    "periods",
    P2,
    "상반기에 새로 가입한 고객",
    cust(P2, lambda c: "2026-01-01" <= c["joined_on"] <= "2026-06-30"),
)
add(
    "periods",
    M2,
    "2024년 하반기에 시작된 계약 건수",
    counted("contract_id", K(M2, lambda k: "2024-07-01" <= k["start_date"] <= "2024-12-31")),
)
add(
    "periods",
    P8,
    "지난달하고 이번 달 미납 내역",
    pays(P8, unpaid_in("2026-05", "2026-06")),
)
add("periods", P1, "Q2 unpaid premiums", pays(P1, unpaid_in(*Q2)))
add(
    "periods",
    HQ,
    "how many unpaid premiums in H1",
    counted("payment_id", P(HQ, unpaid_in(*H1))),
)
add("periods", M2, "unpaid premiums YTD", pays(M2, unpaid_in(*H1)))
add("periods", P4, "unpaid premiums since March", pays(P4, unpaid_in("2026-03", "2026-06")))
add(
    "periods",
    HQ,
    "2024년 되기 전에 가입한 고객 몇 명이에요?",
    counted("customer_id", C(HQ, lambda c: c["joined_on"] < "2024-01-01")),
)
add(
    "periods",
    P7,
    "contracts that started in H2 2025",
    contr(P7, lambda k: "2025-07-01" <= k["start_date"] <= "2025-12-31"),
)
add("periods", M1, "last month's payments", pays(M1, month_in(*MAY)))
add(
    "periods",
    HQ,
    "how many customers joined in Q1 2026",
    counted("customer_id", C(HQ, lambda c: "2026-01-01" <= c["joined_on"] <= "2026-03-31")),
)
add(
    "periods",
    M3,
    "작년 하반기 신규 가입 고객",
    cust(M3, lambda c: "2025-07-01" <= c["joined_on"] <= "2025-12-31"),
)
add(
    "periods",
    P3,
    "2024년 전에 체결된 계약",
    contr(P3, lambda k: k["start_date"] < "2024-01-01"),
)

# --- money_received: 납입/들어온/받은/collected = paid rows only; 미납/outstanding = unpaid ------
add("money_received", P1, "납입 건수 알려줘", counted("payment_id", P(P1, paid)))
add(
    "money_received",
    M1,
    "지금까지 받은 보험료 합계",
    number_is(total(filter(paid, payment_view(M1)), lambda p: p["amount"]), ("total_amount",)),
)
add(
    "money_received",
    P6,
    "올해 들어온 보험료 총액은?",
    number_is(amount_of(P6, received(P6, *H1)), ("total_amount",)),
)
add(
    "money_received",
    P3,
    "미납 총액 얼마야",
    number_is(total(filter(unpaid, payment_view(P3)), lambda p: p["amount"]), ("total_amount",)),
)
add(
    "money_received",
    P1,
    "지난달 들어온 보험료 몇 건이에요?",
    counted("payment_id", received(P1, *MAY)),
)
add(
    "money_received",
    HQ,
    "지점별 받은 보험료 합계",
    grouped(
        "branch_id",
        group(filter(paid, payment_view(HQ)), "branch_id", lambda p: p["amount"]),
        ("total_amount",),
    ),
)
add(
    "money_received",
    M3,
    "납입 총액 많은 고객 top 3",
    ranked(
        "customer_id", paid_totals(M3, paid_only=True), 3, descending=True, measure="total_amount"
    ),
)
add(
    "money_received",
    HQ,
    "상품별 납입 총액",
    grouped(
        "product_code",
        group(filter(paid, payment_view(HQ)), "product_code", lambda p: p["amount"]),
        ("total_amount",),
    ),
)
add(
    "money_received",
    M1,
    "이번 달 받은 보험료 얼마예요?",
    number_is(amount_of(M1, received(M1, *JUNE)), ("total_amount",)),
)
add(
    "money_received",
    P7,
    "고객별 미납 금액 합계",
    grouped(
        "customer_id",
        group(filter(unpaid, payment_view(P7)), "customer_id", lambda p: p["amount"]),
        ("total_amount",),
    ),
)
add(
    "money_received",
    HQ,
    "월별 납입 건수",
    grouped("due_month", group(filter(paid, payment_view(HQ)), "due_month")),
)
add(
    "money_received",
    M1,
    "VIP 고객한테서 들어온 보험료 총액",
    number_is(
        total(filter(both(paid, VIP), payment_view(M1)), lambda p: p["amount"]),
        ("total_amount",),
    ),
)
add(
    "money_received",
    M3,
    "작년에 받은 보험료 합계",
    number_is(amount_of(M3, received(M3, *LAST_YEAR)), ("total_amount",)),
)
add(
    "money_received",
    M2,
    "5월분 보험료 중에 들어온 건 목록",
    pays(M2, lambda p: paid(p) and p["due_month"] == "2026-05"),
)
add(
    "money_received",
    P4,
    "입금일이 3월인 납입 내역",
    pays(P4, lambda p: paid(p) and p["paid_date"].startswith("2026-03")),
)
add(
    "money_received",
    P2,
    "how much premium have we collected this year",
    number_is(amount_of(P2, received(P2, *H1)), ("total_amount",)),
)
add(
    "money_received",
    P1,
    "how many payments were received in May",
    counted("payment_id", received(P1, *MAY)),
)
add(
    "money_received",
    M2,
    "total outstanding premiums",
    number_is(total(filter(unpaid, payment_view(M2)), lambda p: p["amount"]), ("total_amount",)),
)
add(
    "money_received",
    P5,
    "내 미납 건수 몇 건이야",
    counted("payment_id", P(P5, unpaid)),
)
add(
    "money_received",
    P7,
    "payments received from VIP customers",
    pays(P7, both(paid, VIP)),
)
add(
    "money_received",
    P7,
    "total premiums received so far",
    number_is(total(filter(paid, payment_view(P7)), lambda p: p["amount"]), ("total_amount",)),
)
add(
    "money_received",
    M1,
    "average amount of the payments received",
    number_is(mean(p["amount"] for p in payment_view(M1) if paid(p)), ("avg_amount",)),
)
add("money_received", P2, "아직 안 들어온 보험료 목록", pays(P2, unpaid))
add(
    "money_received",
    P5,
    "how many premiums were collected in Q1",
    counted("payment_id", received(P5, *Q1)),
)

# --- everyday: everyday verbs and honorifics -------------------------------------------------
add("everyday", P1, "살아있는 계약 보여줘", contr(P1, ACTIVE))
add(
    "everyday",
    M1,
    "만기 끝난 계약 몇 건이에요?",
    counted("contract_id", K(M1, is_("status", "만기"))),
)
add("everyday", P2, "해지 들어간 계약 목록", contr(P2, is_("status", "해지")))
add("everyday", M2, "실효돼서 효력 없어진 계약 있어요?", contr(M2, is_("status", "실효")))
add("everyday", P3, "기간 다 돼서 만기된 계약들", contr(P3, is_("status", "만기")))
add("everyday", M3, "우리 지점 고객님 몇 분 계세요?", counted("customer_id", C(M3)))
add("everyday", P4, "60세 이상 어르신 고객", cust(P4, aged(60)))
add("everyday", P8, "이름에 '민' 들어가는 고객", cust(P8, name_has("민")))
add(
    "everyday",
    M4,
    "한 달에 내는 보험료가 10만원 넘는 계약",
    contr(M4, premium(lambda v: v > 100_000)),
)
add(
    "everyday",
    P7,
    "만기가 가장 임박한 계약 3건",
    ranked_same("contract_id", future_ends(P7), future_ends(P7, ACTIVE), 3, descending=False),
)
add("everyday", P5, "살아 있는 계약 몇 개야", counted("contract_id", K(P5, ACTIVE)))
add(
    "everyday",
    M3,
    "이름에 민 자 들어가는 분 몇 분이세요?",
    counted("customer_id", C(M3, name_has("민"))),
)
add(
    "everyday",
    P6,
    "매달 나가는 보험료가 제일 비싼 계약 하나만",
    ranked_same("contract_id", premiums(P6), premiums(P6, ACTIVE), 1, descending=True),
)
add("everyday", M1, "아직 살아있는 VIP 계약", contr(M1, both(ACTIVE, VIP)))
add("everyday", P6, "어르신 고객님 중에 70세 넘으신 분", cust(P6, lambda c: c["age"] > 70))
add(
    "everyday",
    P8,
    "한 달에 내는 보험료 3만원 이하 계약",
    contr(P8, premium(lambda v: v <= 30_000)),
)
add("everyday", HQ, "살아있는 계약 몇 건?", counted("contract_id", K(HQ, ACTIVE)))
add(
    "everyday",
    P2,
    "이름에 지민 들어가는 고객님",
    cust(P2, name_has("지민")),
)
add("everyday", P1, "my contracts that are still alive", contr(P1, ACTIVE))
add("everyday", M2, "contracts that have already matured", contr(M2, is_("status", "만기")))
add(
    "everyday",
    HQ,
    "how many elderly customers aged 65 or older do we have",
    counted("customer_id", C(HQ, aged(65))),
)
add(
    "everyday",
    M4,
    "which contract matures soonest",
    ranked_same("contract_id", future_ends(M4), future_ends(M4, ACTIVE), 1, descending=False),
)
add(
    "everyday",
    P5,
    "customers with 민 in their name",
    cust(P5, name_has("민")),
)
add(
    "everyday",
    P4,
    "contracts where the customer pays less than 15,000 a month",
    contr(P4, premium(lambda v: v < 15_000)),
)

# --- grouping: per branch, product, grade, year, month, region; counts over own rows ---------
add(
    "grouping",
    HQ,
    "지점마다 고객이 몇 명씩이에요?",
    grouped("branch_id", group(customer_view(HQ), "branch_id")),
)
add(
    "grouping",
    M1,
    "상품별로 계약 몇 건씩 있어?",
    grouped("product_code", group(contract_view(M1), "product_code")),
)
add(
    "grouping",
    HQ,
    "등급별 납입 총액",
    grouped(
        "grade",
        group(filter(paid, payment_view(HQ)), "grade", lambda p: p["amount"]),
        ("total_amount",),
    ),
)
add(
    "grouping",
    HQ,
    "가입연도별 고객 수",
    grouped_by_value(year_counts(customer_view(HQ), "joined_on")),
)
add(
    "grouping",
    HQ,
    "지역별 고객 수",
    grouped_by_value(dict(Counter(REGION[c["branch_id"]] for c in customer_view(HQ)))),
)
add("grouping", P1, "등급별로 내 고객 몇 명?", grouped("grade", group(customer_view(P1), "grade")))
add(
    "grouping",
    M3,
    "계약이 2건 이상인 고객",
    rows_are("customer_id", holders(M3, 2)),
)
add(
    "grouping",
    HQ,
    "계약을 3건 이상 한 고객 몇 명이에요",
    counted("customer_id", holders(HQ, 3)),
)
add(
    "grouping",
    M4,
    "우리 지점 월별 미납 건수",
    grouped("due_month", group(filter(unpaid, payment_view(M4)), "due_month")),
)
add(
    "grouping",
    HQ,
    "연도별 계약 건수",
    grouped_by_value(year_counts(contract_view(HQ), "start_date")),
)
add(
    "grouping",
    M1,
    "설계사별 고객 수 알려줘",
    grouped("planner_id", group(customer_view(M1), "planner_id")),
)
add(
    "grouping",
    HQ,
    "연령대별 VIP 고객 수",
    grouped(
        "age_group",
        group(
            [{"age_group": f"{c['age'] // 10 * 10}대"} for c in customer_view(HQ) if VIP(c)],
            "age_group",
        ),
    ),
)
add(
    "grouping",
    HQ,
    "상품 분류별 계약 몇 건",
    grouped("category", group(contract_view(HQ), "category")),
)
add("grouping", P3, "상태별 내 계약 수", grouped("status", group(contract_view(P3), "status")))
add(
    "grouping",
    P5,
    "유지 계약 상품별 월보험료 합계",
    grouped(
        "product_code",
        group(filter(ACTIVE, contract_view(P5)), "product_code", lambda k: k["monthly_premium"]),
        ("total_monthly_premium",),
    ),
)
add(
    "grouping",
    M2,
    "유지 계약이 2건 이상인 고객 수",
    counted("customer_id", holders(M2, 2, ACTIVE)),
)
add(
    "grouping",
    HQ,
    "지점별로 계약 몇 건씩",
    grouped("branch_id", group(contract_view(HQ), "branch_id")),
)
add(
    "grouping",
    M2,
    "unpaid count by product",
    grouped("product_code", group(filter(unpaid, payment_view(M2)), "product_code")),
)
add(
    "grouping",
    HQ,
    "등급마다 계약 건수",
    grouped("grade", group(contract_view(HQ), "grade")),
)
add(
    "grouping",
    P2,
    "customers with at least 2 contracts",
    rows_are("customer_id", holders(P2, 2)),
)
add(
    "grouping",
    M2,
    "how many customers does each planner have",
    grouped("planner_id", group(customer_view(M2), "planner_id")),
)
add(
    "grouping",
    HQ,
    "number of new customers by year",
    grouped_by_value(year_counts(customer_view(HQ), "joined_on")),
)
add(
    "grouping",
    P6,
    "unpaid amount by month",
    grouped(
        "due_month",
        group(filter(unpaid, payment_view(P6)), "due_month", lambda p: p["amount"]),
        ("total_amount",),
    ),
)
add(
    "grouping",
    HQ,
    "customers by region",
    grouped_by_value(dict(Counter(REGION[c["branch_id"]] for c in customer_view(HQ)))),
)

# --- casual_english: texting, typos, lowercase ---------------------------------------------
add("casual_english", P1, "show me my custmers pls", cust(P1))
add("casual_english", M1, "how many ppl r in my branch", counted("customer_id", C(M1)))
add("casual_english", P2, "unpayed premuims this month", pays(P2, unpaid_in(*JUNE)))
add(
    "casual_english",
    HQ,
    "priciest 3 contracts",
    ranked_same("contract_id", premiums(HQ), premiums(HQ, ACTIVE), 3, descending=True),
)
add("casual_english", M2, "q2 unpaid", pays(M2, unpaid_in(*Q2)))
add("casual_english", P3, "vip custmers", cust(P3, VIP))
add(
    "casual_english",
    HQ,
    "how many ppl joined this yr",
    counted("customer_id", C(HQ, lambda c: c["joined_on"].startswith("2026"))),
)
add("casual_english", P4, "lapsed contracts pls", contr(P4, is_("status", "실효")))
add("casual_english", M3, "r there any cancelled contracts", contr(M3, is_("status", "해지")))
add("casual_english", P5, "u got any unpaid premuims from last month", pays(P5, unpaid_in(*MAY)))
add(
    "casual_english",
    P3,
    "total premuim collected in q1",
    number_is(amount_of(P3, received(P3, *Q1)), ("total_amount",)),
)
add(
    "casual_english",
    P5,
    "custmers over 60",
    rows_are("customer_id", same_either_way(C(P5, aged(60)), C(P5, aged(61)))),
)
add("casual_english", M4, "female custmers w/ vip grade", cust(M4, both(is_("gender", "F"), VIP)))
add("casual_english", P7, "which contracts r still active", contr(P7, ACTIVE))
add(
    "casual_english",
    HQ,
    "how many contracts per product pls",
    grouped("product_code", group(contract_view(HQ), "product_code")),
)
add(
    "casual_english",
    P8,
    "my custmers born in the 90s",
    cust(P8, lambda c: 1990 <= c["birth_year"] <= 1999),
)
add(
    "casual_english",
    M1,
    "monthly premuim above 100k contracts",
    contr(M1, premium(lambda v: v > 100_000)),
)
add(
    "casual_english",
    P1,
    "whos got unpaid stuff",
    rows_are("customer_id", customers_with(payment_view(P1), unpaid)),
)
add(
    "casual_english",
    HQ,
    "avg monthly premuim for active contracts",
    number_is(
        mean(k["monthly_premium"] for k in contract_view(HQ) if ACTIVE(k)),
        ("avg_monthly_premium",),
    ),
)
add(
    "casual_english",
    P2,
    "how many contracts did i sell last yr",
    counted("contract_id", K(P2, lambda k: k["start_date"].startswith("2025"))),
)
add(
    "casual_english",
    M3,
    "male custmers under 40",
    cust(M3, lambda c: c["gender"] == "M" and c["age"] < 40),
)
add(
    "casual_english",
    HQ,
    "unpaid count by branch pls",
    grouped("branch_id", group(filter(unpaid, payment_view(HQ)), "branch_id")),
)
add(
    "casual_english",
    P4,
    "customers that joined b4 2020",
    cust(P4, lambda c: c["joined_on"] < "2020-01-01"),
)
add("casual_english", M4, "hw many unpaid premuims in total", counted("payment_id", P(M4, unpaid)))

# --- birthdays: a birth day (head office: refused), a birth year (answered for everyone) -----
add("birthdays", P1, "생일 2월 11일인 고객 누구야", cust(P1, born_on(2, 11)))
add("birthdays", P1, "4월 7일생 고객", cust(P1, born_on(4, 7)))
add("birthdays", M2, "10월 17일생 고객 몇 명?", counted("customer_id", C(M2, born_on(10, 17))))
add("birthdays", M3, "3월 7일이 생일인 고객", cust(M3, born_on(3, 7)))
add("birthdays", HQ, "3월 7일생 고객 목록", BIRTH_KO, refusal=True)
add("birthdays", HQ, "1987년 2월 11일생 고객", BIRTH_KO, refusal=True)
add(
    "birthdays",
    M1,
    "1987.02.11생 고객",
    cust(M1, lambda c: c["birth_date"] == "1987-02-11"),
)
add("birthdays", P4, "10월 17일 생일인 고객 보여줘", cust(P4, born_on(10, 17)))
add(
    "birthdays",
    HQ,
    "1972년생 VIP 고객 몇 명이에요?",
    counted("customer_id", C(HQ, lambda c: c["birth_year"] == 1972 and VIP(c))),
)
add("birthdays", P6, "3월 7일에 태어난 고객", cust(P6, born_on(3, 7)))
add("birthdays", M3, "9월 22일생 고객 보여주세요", cust(M3, born_on(9, 22)))
add("birthdays", HQ, "생일이 9월 22일인 고객 수", BIRTH_KO, refusal=True)
add("birthdays", M1, "11월 14일생", cust(M1, born_on(11, 14)))
add(
    "birthdays",
    P3,
    "1989년 9월생 고객",
    cust(P3, lambda c: c["birth_date"].startswith("1989-09")),
)
add("birthdays", HQ, "1990년 5월생 고객 몇 명", BIRTH_KO, refusal=True)
add("birthdays", M2, "2월 10일 태어난 분들", cust(M2, born_on(2, 10)))
add(
    "birthdays",
    M1,
    "1987년 2월 11일생 고객의 계약",
    contr(M1, lambda k: k["birth_date"] == "1987-02-11"),
)
add("birthdays", P5, "customers born on 2 May", cust(P5, born_on(5, 2)))
add(
    "birthdays",
    M4,
    "customers whose birthday is November 24",
    cust(M4, born_on(11, 24)),
)
add("birthdays", HQ, "customers with a birthday on Feb 11", BIRTH_EN, refusal=True)
add("birthdays", HQ, "customers born on 3 March", BIRTH_EN, refusal=True)
add("birthdays", P8, "who was born on 24 November", cust(P8, born_on(11, 24)))
add(
    "birthdays",
    HQ,
    "customers born in 1990",
    cust(HQ, lambda c: c["birth_year"] == 1990),
)
add(
    "birthdays",
    M4,
    "how many customers have a birthday on August 9",
    counted("customer_id", C(M4, born_on(8, 9))),
)

# --- refusals: data the KB does not hold; conditions on a column the asker sees masked -------
add("refusals", P1, "내 고객들 보험금 청구 내역 좀", refused("청구"), refusal=True)
add("refusals", HQ, "주소지별 고객 수", refused("주소"), refusal=True)
add("refusals", M1, "고객들 메일 주소 리스트 뽑아줘", refused("메일", "이메일"), refusal=True)
add("refusals", P2, "연소득 높은 고객 순으로 보여줘", refused("소득", "연소득"), refusal=True)
add("refusals", HQ, "고객 신용점수 평균", refused("신용"), refusal=True)
add("refusals", M2, "당뇨 진단 받은 고객", refused("진단", "당뇨", "병력"), refusal=True)
add("refusals", P3, "이번 달 내 커미션 얼마 받아?", refused("커미션", "수수료"), refusal=True)
add("refusals", HQ, "내년 보험료 수입 예측해줘", refused("예측"), refusal=True)
add("refusals", HQ, "이름에 민 들어간 고객 찾아줘", refused(*NAME), refusal=True)
add("refusals", HQ, "010-3으로 시작하는 번호 쓰는 고객 수", refused(*PHONE), refusal=True)
add("refusals", HQ, "주민번호가 8로 시작하는 고객 목록", refused(*RRN), refusal=True)
add("refusals", M1, "핸드폰 끝번호 2842인 고객", refused(*PHONE), refusal=True)
add("refusals", P6, "주민번호 뒷자리 1234567인 고객", refused(*RRN), refusal=True)
add("refusals", M2, "전화번호 010-1234-5678인 고객 찾아줘", refused(*PHONE), refusal=True)
add("refusals", P7, "고객별 보험금 지급 내역", refused("보험금", "지급"), refusal=True)
add("refusals", M4, "고객 직장 정보 알려줘", refused("직장", "직업"), refusal=True)
add(
    "refusals",
    P4,
    "claims filed by my customers",
    refused("claim", english=True),
    refusal=True,
)
add(
    "refusals",
    M3,
    "customers' email addresses",
    refused("email", "e-mail", english=True),
    refusal=True,
)
add(
    "refusals",
    HQ,
    "customers with a credit score over 800",
    refused("credit", english=True),
    refusal=True,
)
add(
    "refusals",
    P5,
    "forecast next quarter's collections",
    refused("forecast", english=True),
    refusal=True,
)
add(
    "refusals",
    M4,
    "which customers have been diagnosed with diabetes",
    refused("diagnos", "diabetes", "medical", english=True),
    refusal=True,
)
add("refusals", P6, "이번 달 내 수당 얼마야", refused("수당", "수수료"), refusal=True)
add("refusals", HQ, "customers named Kim", refused("name", english=True), refusal=True)
add(
    "refusals",
    M2,
    "customer with resident number 900101-1234567",
    refused("resident", "RRN", english=True),
    refusal=True,
)
add(
    "refusals",
    HQ,
    "how many customers have a phone number starting with 010-3",
    refused("phone", english=True),
    refusal=True,
)
add("refusals", P1, "고객 집 주소 좀 알려줘", refused("주소"), refusal=True)

# --- mixed: several conditions at once, as an assistant gets them ----------------------------
add(  # the half by due month or by paid date: the same 42 customers
    "mixed",
    HQ,
    "작년 하반기 납입 총액이 10만원 넘는 VIP 고객 몇 분?",
    counted(
        "customer_id",
        same_either_way(
            paid_over(HQ, 100_000, lambda p: VIP(p) and month_in(*LAST_H2)(p)),
            paid_over(HQ, 100_000, lambda p: VIP(p) and "2025-07" <= p["paid_date"] < "2026-01"),
        ),
    ),
)
add(
    "mixed",
    P3,
    "작년 하반기에 한 번에 10만원 넘게 들어온 적 있는 VIP 고객",
    rows_are(
        "customer_id",
        customers_with(
            payment_view(P3),
            lambda p: (
                p["payment_id"] in received(P3, *LAST_H2) and p["amount"] > 100_000 and VIP(p)
            ),
        ),
    ),
)
add(
    "mixed",
    M1,
    "올해 상반기에 미납 2건 이상 있는 고객",
    rows_are(
        "customer_id",
        frozenset(
            cid
            for cid, n in Counter(
                p["customer_id"] for p in payment_view(M1) if unpaid_in(*H1)(p)
            ).items()
            if n >= 2
        ),
    ),
)
add(
    "mixed",
    P6,
    "40대 여성 VIP 고객들 유지 계약 월보험료 합계",
    number_is(
        total(
            [
                k
                for k in contract_view(P6)
                if aged(40, 49)(k) and k["gender"] == "F" and VIP(k) and ACTIVE(k)
            ],
            lambda k: k["monthly_premium"],
        ),
        ("total_monthly_premium",),
    ),
)
add(
    "mixed",
    HQ,
    "2024년 전에 가입한 VIP 고객 중 미납 있는 분 몇 명?",
    counted(
        "customer_id",
        customers_with(
            payment_view(HQ), lambda p: unpaid(p) and VIP(p) and p["joined_on"] < "2024-01-01"
        ),
    ),
)
add(
    "mixed",
    P3,
    "1분기에 미납 있었던 남자 고객",
    rows_are(
        "customer_id",
        customers_with(payment_view(P3), lambda p: unpaid_in(*Q1)(p) and p["gender"] == "M"),
    ),
)
add(
    "mixed",
    HQ,
    "해운대지점 1분기 미납 금액 합계",
    number_is(
        total(
            [p for p in payment_view(HQ) if unpaid_in(*Q1)(p) and p["branch_id"] == "BR-HD"],
            lambda p: p["amount"],
        ),
        ("total_amount",),
    ),
)
add(
    "mixed",
    P4,
    "월 5만원 넘게 내는 유지 계약 중 2030년 이후 만기인 것",
    contr(
        P4,
        lambda k: k["monthly_premium"] > 50_000 and ACTIVE(k) and k["end_date"] >= "2030-01-01",
    ),
)
add(
    "mixed",
    M3,
    "작년에 가입한 고객 중 계약 2건 이상인 사람",
    rows_are("customer_id", holders(M3, 2, keep=lambda c: c["joined_on"].startswith("2025"))),
)
add(
    "mixed",
    HQ,
    "종로지점 지난달 미납 금액 합계는?",
    number_is(
        total(
            [p for p in payment_view(HQ) if unpaid_in(*MAY)(p) and p["branch_id"] == "BR-JR"],
            lambda p: p["amount"],
        ),
        ("total_amount",),
    ),
)
add(
    "mixed",
    P6,
    "이름에 '지' 들어가는 고객의 살아있는 계약",
    contr(P6, lambda k: "지" in k["customer_name"] and ACTIVE(k)),
)
add(
    "mixed",
    HQ,
    "상품별 올 상반기 미납 건수",
    grouped("product_code", group(filter(unpaid_in(*H1), payment_view(HQ)), "product_code")),
)
add(
    "mixed",
    M2,
    "2분기 동안 한 번도 안 밀린 VIP 고객",
    rows_are(
        "customer_id",
        C(M2, VIP) - customers_with(payment_view(M2), unpaid_in(*Q2)),
    ),
)
add(
    "mixed",
    P8,
    "80년대생 고객들 월보험료 3만원 미만 계약 목록",
    contr(P8, lambda k: 1980 <= k["birth_year"] <= 1989 and k["monthly_premium"] < 30_000),
)
add(
    "mixed",
    HQ,
    "대전 쪽 50대 고객 몇 명이에요?",
    counted("customer_id", C(HQ, lambda c: c["branch_id"] == "BR-DS" and aged(50, 59)(c))),
)
add(
    "mixed",
    M1,
    "60세 이상 어르신 중 살아있는 계약 2건 이상인 분",
    rows_are("customer_id", holders(M1, 2, ACTIVE, keep=aged(60))),
)
add(
    "mixed",
    M2,
    "how many active contracts over 50k a month belong to customers over 60",
    counted(
        "contract_id",
        same_either_way(
            K(M2, lambda k: ACTIVE(k) and k["monthly_premium"] > 50_000 and k["age"] >= 60),
            K(M2, lambda k: ACTIVE(k) and k["monthly_premium"] > 50_000 and k["age"] > 60),
        ),
    ),
)
add(
    "mixed",
    HQ,
    "vip customers who joined since 2025 and have unpaid premiums",
    rows_are(
        "customer_id",
        customers_with(
            payment_view(HQ), lambda p: unpaid(p) and VIP(p) and p["joined_on"] >= "2025-01-01"
        ),
    ),
)
add(
    "mixed",
    P5,
    "unpaid premiums over 50k since march",
    pays(P5, lambda p: unpaid_in("2026-03", "2026-06")(p) and p["amount"] > 50_000),
)
add(
    "mixed",
    HQ,
    "how many women in their 30s have a lapsed contract",
    counted(
        "customer_id",
        customers_with(
            contract_view(HQ),
            lambda k: k["gender"] == "F" and aged(30, 39)(k) and k["status"] == "실효",
        ),
    ),
)
add(
    "mixed",
    M3,
    "total collected from VIP customers last year",
    number_is(amount_of(M3, received(M3, *LAST_YEAR, VIP)), ("total_amount",)),
)
add(
    "mixed",
    P7,
    "customers who joined before 2022 with an active contract over 30,000 a month",
    rows_are(
        "customer_id",
        customers_with(
            contract_view(P7),
            lambda k: k["joined_on"] < "2022-01-01" and ACTIVE(k) and k["monthly_premium"] > 30_000,
        ),
    ),
)
add(
    "mixed",
    M4,
    "VIP 고객 중에 가입금액 5천만원 이상 유지 계약 있는 분 누구예요?",
    rows_are(
        "customer_id",
        customers_with(
            contract_view(M4), lambda k: VIP(k) and ACTIVE(k) and k["sum_insured"] >= 50_000_000
        ),
    ),
)
add(
    "mixed",
    HQ,
    "average monthly premium of active contracts by branch for customers 50 and up",
    grouped_near(
        "branch_id",
        {
            b: mean(
                k["monthly_premium"]
                for k in contract_view(HQ)
                if k["branch_id"] == b and ACTIVE(k) and k["age"] >= 50
            )
            for b in sorted({k["branch_id"] for k in contract_view(HQ)})
        },
        ("avg_monthly_premium",),
    ),
)
