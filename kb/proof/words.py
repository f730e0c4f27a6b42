"""The proof-reader's words: grouping ("지점별", "per branch"), statuses in everyday speech
("살아있는" is in force, "들어온 보험료" is paid), people words that are never a name
("어르신"), and a name asked for as part of a name ("이름에 '민' 들어가는").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.catalogue import ALL_STATUS_WORDS, CONTRACTS, PAID_WORDS, PAYMENTS

_HANGUL = re.compile(r"[\uac00-\ud7a3]")
MONEY_WORDS = re.compile(
    r"보험료|금액|원\b|만원|억|가입금액|보장|납입액|premium|amount|\bwon\b|krw|sum insured|"
    r"coverage|\$|₩",
    re.IGNORECASE,
)


def english(text: str) -> bool:
    return _HANGUL.search(text) is None


# -- grouping ------------------------------------------------------------------------------------

DIM_FIELDS: dict[str, tuple[str, ...]] = {
    "branch": ("branch_id", "branch_name"),
    "planner": ("planner_id", "planner_name"),
    "product": ("product_code", "product_name"),
    "category": ("category",),
    "grade": ("grade",),
    "status": ("status",),
    "gender": ("gender",),
    "age_group": ("age_group",),
    "month": ("due_month",),
    "year": (),  # no plan groups by year: a question that asks it is refused, not answered
    "region": ("region",),
    "customer": ("customer_id", "customer_name"),
    "contract": ("contract_id",),
}
DIM_LABEL = {
    "branch": ("지점", "branch"), "planner": ("설계사", "planner"),
    "product": ("상품", "product"), "category": ("상품 분류", "category"),
    "grade": ("등급", "grade"), "status": ("상태", "status"), "gender": ("성별", "gender"),
    "age_group": ("연령대", "age group"), "month": ("월", "month"), "year": ("연도", "year"),
    "region": ("지역", "region"), "customer": ("고객", "customer"),
    "contract": ("계약", "contract"),
}  # fmt: skip
_KO_DIMS = {
    "지점": "branch", "점포": "branch", "설계사": "planner", "담당자": "planner",
    "플래너": "planner", "상품": "product", "보험상품": "product", "분류": "category",
    "종류": "category", "카테고리": "category", "상품군": "category", "등급": "grade",
    "상태": "status", "남녀": "gender", "연령대": "age_group", "나이대": "age_group",
    "연령": "age_group", "나이": "age_group", "연도": "year", "년도": "year", "연": "year",
    "년": "year", "해": "year", "월": "month", "달": "month", "지역": "region", "시도": "region",
    "도시": "region", "고객": "customer", "계약": "contract",
}  # fmt: skip
_EN_DIMS = {
    "branch": "branch", "branches": "branch", "office": "branch", "offices": "branch",
    "planner": "planner", "planners": "planner", "agent": "planner", "agents": "planner",
    "product": "product", "products": "product", "category": "category",
    "product category": "category", "product categories": "category",
    "product type": "category", "product types": "category", "product line": "category",
    "product lines": "category",
    "categories": "category", "type": "category", "types": "category", "grade": "grade",
    "grades": "grade", "tier": "grade", "tiers": "grade", "status": "status",
    "statuses": "status", "gender": "gender", "genders": "gender", "sex": "gender",
    "age group": "age_group", "age groups": "age_group", "age band": "age_group",
    "age bands": "age_group", "month": "month", "months": "month", "year": "year",
    "years": "year", "region": "region", "regions": "region", "city": "region",
    "cities": "region",
}  # fmt: skip
_KO_GROUP = re.compile(
    r"(?<![가-힣])(" + "|".join(sorted(_KO_DIMS, key=len, reverse=True)) + r")\s?(?:별|마다)"
    r"|(?<![가-힣])각\s?(지점|설계사|상품|등급|지역)(?:[가-힣]{0,2})(?=\s|$)"
)
_EN_GROUP = re.compile(
    r"(?<!sorted )(?<!ordered )(?<!ranked )(?<!sort )(?<!order )(?<!rank )"
    r"\b(?:per|by|for each|each|across|broken down by|grouped by|split by)\s+(?:the\s+)?("
    + "|".join(sorted(_EN_DIMS, key=len, reverse=True))
    + r")\b",
    re.IGNORECASE,
)


def groupings(text: str) -> list[tuple[str, str]]:
    """(words, dimension) of each grouping the question asks for."""
    found = []
    for m in _KO_GROUP.finditer(text):
        found.append((m.group(0).strip(), _KO_DIMS.get(m.group(1) or m.group(2), "branch")))
    for m in _EN_GROUP.finditer(text):
        dim = _EN_DIMS[m.group(1).lower()]
        if dim == "month" and MONEY_WORDS.search(text) and m.group(0).lower().startswith("per"):
            continue  # "100,000 won per month": the monthly premium, not a grouping
        found.append((m.group(0), dim))
    return found


# -- statuses ------------------------------------------------------------------------------------

# Words that name a status outright: the plan must carry it (or its negation).
_NAMED = [
    (re.compile(r"살아\s?있|in[\s-]force", re.I), CONTRACTS, "유지"),
    (re.compile(r"해지|해약|cancell?ed|terminated|surrendered", re.I), CONTRACTS, "해지"),
    (re.compile(r"실효|lapsed", re.I), CONTRACTS, "실효"),
    (re.compile(r"미납|연체|밀린|체납|unpaid|overdue|delinquent", re.I), PAYMENTS, "미납"),
    (re.compile("|".join(PAID_WORDS), re.I), PAYMENTS, "납입"),
]
# Words that allow a status in the plan (the plan may not carry a status nobody asked for).
_CUES = {
    "유지": r"유지|살아\s?있|유효|정상|진행\s?중|보유|계속|active|in[\s-]force|live|ongoing|valid|"
    r"current|만기|만료|matur|expir",
    "해지": r"해지|해약|취소|깨|cancel|terminat|surrender",
    "실효": r"실효|효력|lapse",
    "만기": r"만기|만료|끝난|끝나|종료|matur|expired|ended|finished",
    "미납": r"미납|연체|밀린|체납|미수|안\s?낸|못\s?낸|안\s?냈|내지\s?않|납입\s?안|납입하지|"
    r"납부\s?안|"
    r"납부하지|unpaid|overdue|missed|outstanding|delinquent|not\s(?:yet\s)?paid|arrear|late|"
    r"never paid|haven't|have not|not come in|went unpaid|gone unpaid|unpay|안\s?들어",
    "납입": r"납입|납부|낸|냈|완납|수납|입금|들어온|받은|paid|collected|received|came in",
}
_CUE_RE = {value: re.compile(pattern, re.I) for value, pattern in _CUES.items()}


_NEGATED = re.compile(r"(?:안|못|not|n't|never)\s?$", re.IGNORECASE)


_ALL_STATUSES = re.compile("|".join(ALL_STATUS_WORDS), re.IGNORECASE)
# Words for a contract's premium or cover: a total or ranking of them counts in-force contracts.
_PREMIUM = re.compile(
    r"보험료|월납|가입\s?금액|보장\s?금액|비싼|저렴|싼\s|premium|sum\s+insured|cover|expensive|"
    r"cheap|pric(?:e|ey|iest|ier)",
    re.IGNORECASE,
)


def premium_said(text: str) -> bool:
    return bool(_PREMIUM.search(text))


@dataclass(frozen=True)
class SaidStatuses:
    named: list[tuple[str, str, str]]  # (words, entity, status) the plan must carry
    cued: set[str]  # statuses the question gives words for
    every: str  # the words asking for every status ("모든 상태"), or ""


def statuses(text: str) -> SaidStatuses:
    named = []
    for pattern, entity, value in _NAMED:
        for m in pattern.finditer(text):
            if value == "납입" and _NEGATED.search(text[: m.start()]):
                value = "미납"  # "안 들어온 보험료": not received is unpaid
            named.append((m.group(0), entity, value))
    cued = {value for value, pattern in _CUE_RE.items() if pattern.search(text)}
    every = _ALL_STATUSES.search(text)
    return SaidStatuses(named, cued, every.group(0) if every else "")


# -- names ---------------------------------------------------------------------------------------

# Words for the elderly: they say no age, so a plan must carry one the question states.
ELDERLY = re.compile(r"어르신|노인|고령|elderly|senior|the old\b", re.IGNORECASE)
# Words for people that are never a customer's name, however they are written.
PEOPLE_WORDS = frozenset(
    "어르신 고객님 손님 사장님 선생님 여사님 아버님 어머님 어른 노인 할머니 할아버지 회원님 "
    "가입자 사모님 분들 여러분 본인 우리 그분 이분 저분".split()
)


def contains_asked(text: str, value: str) -> bool:
    """'이름에 '민' 들어가는', 'names containing "min"': part of a name, not the whole name."""
    v = re.escape(value)
    after = rf"{v}['\"’”]?\s?(?:이|가|을|를|자|라는 글자|글자)?\s?(?:가\s?)?(?:들어|포함|섞인|있는)"
    before = rf"(?:contain\w*|includ\w*|with)\s+['\"]?{v}['\"]?\s+(?:in\s+)?(?:the|their)?\s*name"
    return bool(re.search(after, text) or re.search(before, text, re.IGNORECASE))


_ASKED_NAME = re.compile(
    r"(?:이름|성함)\s?(?:에|이|에서)?\s?['\"‘’“”]?([가-힣]{1,3})['\"‘’“”]?\s?(?:자|글자)?\s?(?:가|이)?\s?"
    r"(?:들어|포함|섞인)"
    r"|(?:with|containing|contains)\s+['\"]?([가-힣]{1,4})['\"]?\s+in\s+(?:their|the)\s+names?",
    re.IGNORECASE,
)


def asked_name_parts(text: str) -> list[str]:
    """The part of a name a question asks for ("이름에 '민' 들어가는" -> 민)."""
    return [m.group(1) or m.group(2) for m in _ASKED_NAME.finditer(text)]
