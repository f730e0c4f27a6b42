"""A held-out Select AI prompt set: new questions, same 13 families as tests/kb/selectai_suite.py.

The parser was tuned on the suite; these questions were written afterwards and were not used to
tune it (different wording, word order, politeness, spacing, typos, English phrasings, other values
and combinations of conditions). Each truth was written from what a user would reasonably mean,
before the questions were run, with the suite's helpers over the CSV files (tests.kb.truth).
Used by tests/kb/test_selectai_heldout.py and bench/selectai_accuracy.py.
"""

from __future__ import annotations

from tests.kb.selectai_suite import (
    FAMILIES,
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
    in_force,
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

CASES: list[Case] = []


def add(family: str, sid: str, prompt: str, check, *, limit: int = 100, refusal=False) -> None:
    assert family in FAMILIES
    number = sum(c.family == family for c in CASES) + 1
    CASES.append(Case(f"heldout-{family}-{number:02d}", family, sid, prompt, limit, check, refusal))


def customers_with(rows, pred) -> frozenset[str]:
    """The customer ids of the contract or payment rows that satisfy pred."""
    return frozenset(r["customer_id"] for r in rows if pred(r))


# paraphrase: politeness levels, spacing, typos, colloquial endings
add("paraphrase", P7, "제 담당 고객님들 목록을 보여주시겠습니까?", cust(P7))
add("paraphrase", P8, "내 고객들 보여 줘", cust(P8))
add("paraphrase", M3, "우리 지점 계약들 다 보여줘", contr(M3))
add(
    "paraphrase",
    HQ,
    "상품별로 월보험료 합계 알려 주세요",
    grouped(
        "product_code",
        group(in_force(contract_view(HQ)), "product_code", lambda k: k["monthly_premium"]),
        ("total_monthly_premium",),
    ),
)
add("paraphrase", P6, "이번달 미납된 보험료 뭐 있어?", pays(P6, unpaid_in("2026-06", "2026-06")))
add("paraphrase", M4, "우리 지점 고객 몇 명이에요?", counted("customer_id", C(M4)))
add("paraphrase", P2, "계약 리스트 보여주세용", contr(P2))
add(
    "paraphrase",
    HQ,
    "설게사별 고객 수",
    grouped("planner_id", group(customer_view(HQ), "planner_id")),
)

# english: other phrasings
add("english", P6, "Show me all of my clients", cust(P6))
add("english", M3, "list the contracts in my branch", contr(M3))
add("english", HQ, "how many contracts are there?", counted("contract_id", K(HQ)))
add("english", P8, "which customers are male?", cust(P8, lambda c: c["gender"] == "M"))
add("english", M2, "lapsed contracts in my branch", contr(M2, lambda k: k["status"] == "실효"))
add("english", HQ, "customers per grade", grouped("grade", group(customer_view(HQ), "grade")))
add("english", P3, "unpaid premiums last month", pays(P3, unpaid_in("2026-05", "2026-05")))
add("english", M1, "what are the terminated contracts", contr(M1, lambda k: k["status"] == "해지"))

# range: other amounts, 넘는/이하인/사이, English, combinations
add(
    "range", P8, "월 보험료가 15만원 넘는 계약", contr(P8, lambda k: k["monthly_premium"] > 150_000)
)
add(
    "range",
    M1,
    "가입금액이 2천만원 이하인 계약",
    contr(M1, lambda k: k["sum_insured"] <= 20_000_000),
)
add(
    "range",
    HQ,
    "월보험료 3만원 미만 계약 건수",
    counted("contract_id", K(HQ, lambda k: k["monthly_premium"] < 30_000)),
)
add(
    "range",
    P5,  # an asker with no contract on either boundary
    "월보험료 5만원에서 10만원 사이 계약",
    rows_are(
        "contract_id",
        same_either_way(
            K(P5, lambda k: 50_000 <= k["monthly_premium"] <= 100_000),
            K(P5, lambda k: 50_000 < k["monthly_premium"] < 100_000),
        ),
    ),
)
add(
    "range",
    M3,
    "contracts with a sum insured over 50 million won",
    contr(M3, lambda k: k["sum_insured"] > 50_000_000),
)
add(
    "range",
    P1,
    "10만원 이상 미납 보험료",
    pays(P1, lambda p: p["amount"] >= 100_000 and p["status"] == "미납"),
)
add(
    "range",
    HQ,
    "how many contracts have a monthly premium above 200,000 won",
    counted("contract_id", K(HQ, lambda k: k["monthly_premium"] > 200_000)),
)
add(
    "range",
    M4,
    "가입금액 3000만원 넘고 월보험료 10만원 미만인 계약",
    contr(M4, lambda k: k["sum_insured"] > 30_000_000 and k["monthly_premium"] < 100_000),
)

# age_birth: other years and decades, ranges of birth years, combined with gender
add("age_birth", P5, "1973년에 태어난 고객", cust(P5, lambda c: c["birth_year"] == 1973))
add("age_birth", M2, "20대 고객 목록", cust(M2, lambda c: 20 <= c["age"] <= 29))
add(
    "age_birth",
    HQ,
    "50대 남성 고객 수",
    counted("customer_id", C(HQ, lambda c: 50 <= c["age"] <= 59 and c["gender"] == "M")),
)
add(
    "age_birth",
    P7,
    "70년대생 여자 고객",
    cust(P7, lambda c: 1970 <= c["birth_year"] <= 1979 and c["gender"] == "F"),
)
add("age_birth", M4, "customers in their 40s", cust(M4, lambda c: 40 <= c["age"] <= 49))
add("age_birth", P2, "나이가 35살 이하인 고객", cust(P2, lambda c: c["age"] <= 35))
add(
    "age_birth",
    M1,
    "1975년생부터 1980년생까지 고객",
    cust(M1, lambda c: 1975 <= c["birth_year"] <= 1980),
)
add("age_birth", HQ, "customers older than 60", cust(HQ, lambda c: c["age"] > 60))

# join_year: other years, 재작년, halves and quarters, combined with gender
add("join_year", P3, "2020년에 가입한 고객", cust(P3, lambda c: c["joined_on"][:4] == "2020"))
add("join_year", M2, "재작년에 가입한 고객", cust(M2, lambda c: c["joined_on"][:4] == "2024"))
add(
    "join_year",
    HQ,
    "2019년 가입 고객 수",
    counted("customer_id", C(HQ, lambda c: c["joined_on"][:4] == "2019")),
)
add(
    "join_year",
    P6,
    "customers who signed up in 2022",
    cust(P6, lambda c: c["joined_on"][:4] == "2022"),
)
add(
    "join_year",
    M1,
    "2025년 하반기에 가입한 고객",
    cust(M1, lambda c: "2025-07-01" <= c["joined_on"] <= "2025-12-31"),
)
add(
    "join_year",
    P3,  # an asker with no woman who joined in 2022
    "2022년 이후 가입한 여성 고객",
    rows_are(
        "customer_id",
        same_either_way(
            C(P3, lambda c: c["joined_on"] >= "2022" and c["gender"] == "F"),
            C(P3, lambda c: c["joined_on"] >= "2023" and c["gender"] == "F"),
        ),
    ),
)
add("join_year", HQ, "customers who joined this year", cust(HQ, lambda c: c["joined_on"] >= "2026"))
add(
    "join_year",
    M3,
    "2020년 2분기 가입 고객",
    cust(M3, lambda c: "2020-04-01" <= c["joined_on"] <= "2020-06-30"),
)

# gender: synonyms, per-group counts, combined with grade
add("gender", P5, "여자 고객 목록 보여줘", cust(P5, lambda c: c["gender"] == "F"))
add("gender", M3, "남자 손님들", cust(M3, lambda c: c["gender"] == "M"))
add(
    "gender",
    HQ,
    "지점별 여성 고객 수",
    grouped("branch_id", group([c for c in customer_view(HQ) if c["gender"] == "F"], "branch_id")),
)
add("gender", P6, "women customers", cust(P6, lambda c: c["gender"] == "F"))
add("gender", M2, "여성 고객의 수", counted("customer_id", C(M2, lambda c: c["gender"] == "F")))
add("gender", P1, "남성 일반 고객", cust(P1, lambda c: c["gender"] == "M" and c["grade"] == "일반"))
add(
    "gender",
    HQ,
    "성별 월보험료 합계",
    grouped(
        "gender",
        group(in_force(contract_view(HQ)), "gender", lambda k: k["monthly_premium"]),
        ("total_monthly_premium",),
    ),
)

# grade: questions, per-branch counts, transliteration, combined with gender
add("grade", P6, "VIP 고객 몇 명?", counted("customer_id", C(P6, lambda c: c["grade"] == "VIP")))
add("grade", M4, "등급이 일반인 고객 목록", cust(M4, lambda c: c["grade"] == "일반"))
add(
    "grade",
    HQ,
    "지점별 VIP 고객 수",
    grouped("branch_id", group([c for c in customer_view(HQ) if c["grade"] == "VIP"], "branch_id")),
)
add("grade", P7, "my VIP clients", cust(P7, lambda c: c["grade"] == "VIP"))
add("grade", M1, "일반 등급 고객의 계약", contr(M1, lambda k: k["grade"] == "일반"))
add("grade", P8, "브이아이피 고객", cust(P8, lambda c: c["grade"] == "VIP"))
add(
    "grade",
    HQ,
    "VIP 고객 중 남성은 몇 명",
    counted("customer_id", C(HQ, lambda c: c["grade"] == "VIP" and c["gender"] == "M")),
)

# status: other verb forms, questions, English, per-status sums
add("status", P6, "실효된 계약 목록", contr(P6, lambda k: k["status"] == "실효"))
add(
    "status",
    M3,
    "해지 계약 몇 건이야?",
    counted("contract_id", K(M3, lambda k: k["status"] == "해지")),
)
add("status", HQ, "만기 계약 목록", contr(HQ, lambda k: k["status"] == "만기"))
add("status", P7, "유지중인 계약", contr(P7, lambda k: k["status"] == "유지"))
add("status", M4, "미납된 보험료 내역", pays(M4, lambda p: p["status"] == "미납"))
add("status", P2, "paid premium payments", pays(P2, lambda p: p["status"] == "납입"))
add(
    "status",
    HQ,
    "계약 상태별 월보험료 합계",
    grouped(
        "status",
        group(contract_view(HQ), "status", lambda k: k["monthly_premium"]),
        ("total_monthly_premium",),
    ),
)
add("status", M1, "matured contracts", contr(M1, lambda k: k["status"] == "만기"))

# negation: other values, other markers (아닌/말고/빼고), two excluded values, with a period
add("negation", P8, "VIP가 아닌 고객", cust(P8, lambda c: c["grade"] != "VIP"))
add("negation", M3, "종신보험 제외 계약", contr(M3, lambda k: k["product_code"] != "LIFE-01"))
add(
    "negation",
    HQ,
    "해운대지점 말고 고객 수",
    counted("customer_id", C(HQ, lambda c: c["branch_id"] != "BR-HD")),
)
add("negation", P1, "남자 빼고 고객 목록", cust(P1, lambda c: c["gender"] != "M"))
add(
    "negation",
    M2,
    "지난 달 납부 내역 중에서 미납 건은 빼고",
    pays(M2, lambda p: p["due_month"] == "2026-05" and p["status"] != "미납"),
)
add("negation", P4, "contracts that are not lapsed", contr(P4, lambda k: k["status"] != "실효"))
add(
    "negation",
    HQ,
    "customers except those in the Gangnam branch",
    cust(HQ, lambda c: c["branch_id"] != "BR-GN"),
)
add(
    "negation",
    M4,
    "만기 및 해지 제외 계약",
    contr(M4, lambda k: k["status"] not in ("만기", "해지")),
)
add("negation", P5, "건강보험 말고 다른 계약", contr(P5, lambda k: k["category"] != "건강"))

# cross_entity: other conditions and targets, combined with ranges, periods and counts
add("cross_entity", P6, "여자 고객들의 계약 목록", contr(P6, lambda k: k["gender"] == "F"))
add(
    "cross_entity",
    M4,
    "VIP 고객의 미납 내역",
    pays(M4, lambda p: p["grade"] == "VIP" and p["status"] == "미납"),
)
add(
    "cross_entity",
    HQ,
    "50대 고객의 월보험료 10만원 이상 계약",
    contr(HQ, lambda k: 50 <= k["age"] <= 59 and k["monthly_premium"] >= 100_000),
)
add(
    "cross_entity",
    P2,
    "암보험 가입한 고객",
    rows_are(
        "customer_id",
        customers_with(contract_view(P2), lambda k: k["product_code"] == "HLTH-02"),
    ),
)
add(
    "cross_entity",
    M1,
    "지난달 미납한 고객",
    rows_are("customer_id", customers_with(payment_view(M1), unpaid_in("2026-05", "2026-05"))),
)
add(
    "cross_entity",
    P7,
    "customers with a lapsed contract",
    rows_are("customer_id", customers_with(contract_view(P7), lambda k: k["status"] == "실효")),
)
add(
    "cross_entity",
    HQ,
    "contracts of customers born in the 1960s",
    contr(HQ, lambda k: 1960 <= k["birth_year"] <= 1969),
)
add(
    "cross_entity",
    M2,
    "해지된 계약이 있는 고객 수",
    counted("customer_id", customers_with(contract_view(M2), lambda k: k["status"] == "해지")),
)

# ranking: other measures and sizes, 제일/낮은 순/bottom, English
add(
    "ranking",
    P6,
    "월보험료 제일 비싼 계약 3개",
    ranked(
        "contract_id",
        {k["contract_id"]: k["monthly_premium"] for k in in_force(contract_view(P6))},
        3,
        descending=True,
        measure="monthly_premium",
    ),
)
add(
    "ranking",
    M4,
    "가입금액이 가장 큰 계약 top 3",
    ranked(
        "contract_id",
        {k["contract_id"]: k["sum_insured"] for k in contract_view(M4)},
        3,
        descending=True,
        measure="sum_insured",
    ),
)
add(
    "ranking",
    HQ,
    "가장 나이 많은 고객 5명",
    ranked(
        "customer_id", {c["customer_id"]: c["age"] for c in customer_view(HQ)}, 5, descending=True
    ),
)
add(
    "ranking",
    P8,
    "최근 가입 고객 3명",
    ranked(
        "customer_id",
        {c["customer_id"]: c["joined_on"] for c in customer_view(P8)},
        3,
        descending=True,
    ),
)
add(
    "ranking",
    M1,
    "월보험료 낮은 순으로 계약 5건",
    ranked(
        "contract_id",
        {k["contract_id"]: k["monthly_premium"] for k in in_force(contract_view(M1))},
        5,
        descending=False,
        measure="monthly_premium",
    ),
)
add(
    "ranking",
    HQ,
    "bottom 5 contracts by sum insured",
    ranked(
        "contract_id",
        {k["contract_id"]: k["sum_insured"] for k in in_force(contract_view(HQ))},
        5,
        descending=False,
        measure="sum_insured",
    ),
)
add(
    "ranking",
    P3,
    "the 3 youngest customers",
    ranked(
        "customer_id", {c["customer_id"]: c["age"] for c in customer_view(P3)}, 3, descending=False
    ),
)
add(
    "ranking",
    M3,
    "납입한 보험료가 가장 많은 고객 3명",
    ranked(
        "customer_id", paid_totals(M3, paid_only=True), 3, descending=True, measure="total_amount"
    ),
)

# period: other months and windows, 분기, English, monthly sums of another year
add("period", P4, "지난 달 미납된 보험료", pays(P4, unpaid_in("2026-05", "2026-05")))
add("period", M2, "최근 2개월 납입 내역", pays(M2, month_in("2026-05", "2026-06")))
add(
    "period",
    HQ,
    "2025년 9월 미납 건수",
    counted("payment_id", P(HQ, unpaid_in("2025-09", "2025-09"))),
)
add("period", P1, "올해 상반기 납입 내역", pays(P1, month_in("2026-01", "2026-06")))
add(
    "period",
    M3,
    "unpaid premiums in the last 3 months",
    pays(M3, unpaid_in("2026-04", "2026-06")),
)
add(
    "period",
    HQ,
    "작년 월별 보험료 합계",
    grouped(
        "due_month",
        group(
            [p for p in payment_view(HQ) if p["due_month"] <= "2025-12"],
            "due_month",
            lambda p: p["amount"],
        ),
        ("total_amount",),
    ),
)
add("period", P5, "2026년 3월 납입 내역", pays(P5, month_in("2026-03", "2026-03")))
add("period", M1, "이번 분기 미납 내역", pays(M1, unpaid_in("2026-04", "2026-06")))
add(
    "period",
    HQ,
    "작년에 시작한 계약 수",
    counted("contract_id", K(HQ, lambda k: k["start_date"][:4] == "2025")),
)

# masked: other masked columns and values (refused) ...
add("masked", HQ, "전화번호 끝자리가 2842인 고객", refused("전화"), refusal=True)
add("masked", HQ, "주민등록번호 앞자리가 870211인 고객 수", refused("주민"), refusal=True)
add(
    "masked",
    M4,
    "customer with phone number 010-8108-7615",
    refused("phone", english=True),
    refusal=True,
)
add("masked", HQ, "신하은 고객 정보", refused("고객명", "이름"), refusal=True)
add("masked", P3, "주민번호가 620814-2994329인 고객", refused("주민"), refusal=True)
add("masked", HQ, "customers born in March 1987", refused("birth", english=True), refusal=True)
add("masked", HQ, "생일이 3월인 고객 수", refused("생년월일", "생일"), refusal=True)
# ... and conditions on what the asker does see, answered.
add(
    "masked",
    HQ,
    "1985년생 여성 고객 수",
    counted("customer_id", C(HQ, lambda c: c["birth_year"] == 1985 and c["gender"] == "F")),
)
add(
    "masked",
    P2,
    "전화번호가 010-8028로 시작하는 고객",
    cust(P2, lambda c: c["phone"].startswith("010-8028")),
)
add(
    "masked",
    M2,
    "생년월일이 1990년 1월 1일 이후인 고객",
    rows_are(
        "customer_id",
        same_either_way(
            C(M2, lambda c: c["birth_date"] >= "1990-01-01"),
            C(M2, lambda c: c["birth_date"] > "1990-01-01"),
        ),
    ),
)


def by_family() -> dict[str, list[Case]]:
    families = {family: [] for family in FAMILIES}
    for case in CASES:
        families[case.family].append(case)
    return families
