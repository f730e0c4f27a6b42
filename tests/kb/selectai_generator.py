"""Generated Select AI questions: each composed from a plan, so its truth is that plan's answer.

A case draws an asker, an entity and one or two conditions from the classes the reader must
read by grammar (amounts in every Korean and English form, comparatives before or after the
number, negated bounds, years with 전/이후/since/before, quarters, everyday status words,
grouping words), renders them in Korean or English with noise (spacing, particles, honorifics,
texting, a typo), and keeps the plan it was composed from. The truth is the composed plan run
through kb.vpd as the same asker, never the reader. A case comes out right (the reader's answer
equals the truth), refused (the reader or the second reading refused it: allowed), or wrong
(an answer that is not the truth: never allowed). Used by tests/kb/test_selectai_generated.py
and bench/selectai_accuracy.py, which reports each class.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

ASKERS = ("KB-P-001", "KB-P-003", "KB-P-006", "KB-M-001", "KB-M-002", "KB-M-004", "KB-H-001")
RIGHT, REFUSED, WRONG = "right", "refused", "wrong"
AS_OF_YEAR = 2026


@dataclass(frozen=True)
class Generated:
    case_class: str  # "amount:ko_hangul:lt", "status:en", "group:ko:branch", …
    stakeholder_id: str
    prompt: str
    plan: dict  # the plan the prompt was composed from
    shape: str  # rows | count | grouped
    language: str


@dataclass
class _Draft:
    entity: str
    filters: list[dict] = field(default_factory=list)
    ko: list[str] = field(default_factory=list)  # condition phrases, in order
    en: list[str] = field(default_factory=list)
    classes: list[str] = field(default_factory=list)


# -- numbers, in every form a person writes them ---------------------------------------------------

_DIGITS = "영일이삼사오육칠팔구"


def _hangul_group(n: int) -> str:
    """0 < n < 10000 in Hangul numerals, with the 일 before 십/백/천 left out ("천오백")."""
    out = ""
    for unit, name in ((1000, "천"), (100, "백"), (10, "십")):
        digit, n = divmod(n, unit)
        if digit:
            out += ("" if digit == 1 else _DIGITS[digit]) + name
    return out + (_DIGITS[n] if n else "")


def ko_hangul(n: int) -> str:
    """15,000,000 -> 천오백만; 35,000 -> 삼만오천; 10,000 -> 만."""
    eok, rest = divmod(n, 100_000_000)
    man, one = divmod(rest, 10_000)
    out = ""
    if eok:
        out += ("" if eok == 1 else _hangul_group(eok)) + "억"
    if man:
        out += ("" if man == 1 else _hangul_group(man)) + "만"
    return out + (_hangul_group(one) if one else "")


def ko_mixed(n: int) -> str:
    """15,000,000 -> 1천5백만; 35,000 -> 3만5천: digits before each unit part."""
    eok, rest = divmod(n, 100_000_000)
    man, one = divmod(rest, 10_000)

    def group(g: int) -> str:
        out = ""
        for unit, name in ((1000, "천"), (100, "백"), (10, "십")):
            digit, g = divmod(g, unit)
            if digit:
                out += f"{digit}{name}"
        return out + (str(g) if g else "")

    return (
        (f"{group(eok)}억" if eok else "")
        + (f"{group(man)}만" if man else "")
        + (group(one) if one else "")
    )


def ko_man(n: int) -> str:
    """150,000 -> 15만; 1,500,000 -> 150만; 120,000,000 -> 1.2억 (only where it is exact)."""
    if n >= 100_000_000 and n % 10_000_000 == 0:
        value = n / 100_000_000
        return f"{value:g}억"
    if n % 10_000 == 0:
        return f"{n // 10_000:,}만".replace(",", "")
    return f"{n:,}"


def korean_forms(n: int) -> dict[str, str]:
    """Every way a Korean question writes the amount n (without its 원)."""
    forms = {"ko_digits": str(n), "ko_commas": f"{n:,}", "ko_hangul": ko_hangul(n)}
    if n % 10_000 == 0 or n >= 100_000_000:
        forms["ko_man"] = ko_man(n)
    if n >= 10_000 and n % 1000 == 0:
        forms["ko_mixed"] = ko_mixed(n)
    return forms


def english_forms(n: int) -> dict[str, str]:
    forms = {"en_commas": f"{n:,}"}
    if n % 1000 == 0 and n < 1_000_000:
        forms["en_k"] = f"{n // 1000}k"
    if n >= 1_000_000 and n % 100_000 == 0:
        forms["en_m"] = f"{n / 1_000_000:g}M"
        forms["en_million"] = f"{n / 1_000_000:g} million"
    return forms


ENGLISH_WORDS = {20: "twenty", 25: "twenty-five", 30: "thirty", 35: "thirty-five", 40: "forty",
                 45: "forty-five", 50: "fifty", 55: "fifty-five", 60: "sixty",
                 65: "sixty-five", 70: "seventy"}  # fmt: skip

# -- comparatives ----------------------------------------------------------------------------------

KO_BOUNDS = {
    "gte": ("{n} 이상",),
    "gt": ("{n} 초과", "{n} 넘는", "{n} 넘게"),
    "lte": ("{n} 이하", "{n} 넘지 않는", "{n}까지"),
    "lt": ("{n} 미만", "{n} 안 되는", "{n} 밑으로"),
    "eq": ("딱 {n}", "정확히 {n}", "{n}짜리"),
}
EN_BOUNDS = {
    "gte": ("at least {n}", "{n} or more", "{n} and up", "no less than {n}"),
    "gt": ("more than {n}", "over {n}", "above {n}"),
    "lte": ("at most {n}", "no more than {n}", "{n} or less", "up to {n}"),
    "lt": ("under {n}", "less than {n}", "below {n}"),
    "eq": ("exactly {n}",),
}
AMOUNT_FIELDS = {
    "monthly_premium": (("월보험료", "월 보험료", "한 달에 내는 보험료"), ("monthly premium",)),
    "sum_insured": (("가입금액", "보장금액"), ("sum insured",)),
    "amount": (("금액",), ("amount",)),
}
AMOUNT_VALUES = {
    "monthly_premium": [v * 1000 for v in range(10, 200, 5)],
    "sum_insured": [v * 1_000_000 for v in range(5, 120, 5)],
    "amount": [v * 1000 for v in range(10, 200, 5)],
}

# -- statuses, in everyday words -------------------------------------------------------------------

STATUS_WORDS = {
    "contracts": {
        "유지": (("유지 중인", "살아있는", "유효한"), ("active", "in-force")),
        "해지": (("해지된", "해지 들어간"), ("cancelled", "terminated")),
        "실효": (("실효된",), ("lapsed",)),
        "만기": (("만기된", "만기 끝난"), ("matured",)),
    },
    "premium_payments": {
        "미납": (("미납된", "밀린", "연체된"), ("unpaid", "overdue")),
        "납입": (("납입된", "들어온"), ("paid", "collected")),
    },
}
NOUNS = {
    "customers": ("고객", "customers"),
    "contracts": ("계약", "contracts"),
    "premium_payments": ("보험료 납입 내역", "premium payments"),
}
KEYS = {"customers": "customer_id", "contracts": "contract_id", "premium_payments": "payment_id"}
GROUPS = {  # entity -> (dimension, plan fields, ko word, en word)
    "customers": (("grade", ["grade"], "등급", "grade"),
                  ("branch", ["branch_id", "branch_name"], "지점", "branch")),
    "contracts": (("product", ["product_code", "product_name"], "상품", "product"),
                  ("status", ["status"], "상태", "status"),
                  ("branch", ["branch_id", "branch_name"], "지점", "branch")),
    "premium_payments": (("status", ["status"], "납입 상태", "status"),),
}  # fmt: skip


# -- composing a case ------------------------------------------------------------------------------


def generate(seed: int, count: int) -> list[Generated]:
    rng = random.Random(seed)
    return [_one(rng) for _ in range(count)]


def _one(rng: random.Random) -> Generated:
    entity = rng.choice(("customers", "contracts", "premium_payments"))
    draft = _Draft(entity)
    kinds = {
        "customers": (_age, _join_year, _grade),
        "contracts": (_amount, _amount, _status, _start_year),
        "premium_payments": (_amount, _status, _quarter),
    }[entity]
    for make in rng.sample(kinds, k=min(len(kinds), rng.choice((1, 1, 2)))):
        make(rng, draft)
    english = rng.random() < 0.4
    shape = rng.choice(("rows", "count", "grouped") if entity != "premium_payments" or draft.filters
                       else ("count", "grouped"))  # fmt: skip
    plan = {"entity": entity, "fields": [], "filters": draft.filters, "group_by": [],
            "aggregates": [], "order_by": [], "limit": 100}  # fmt: skip
    group = None
    if shape == "grouped":
        group = rng.choice(GROUPS[entity])
        plan["group_by"] = list(group[1])
    if shape != "rows":
        plan["aggregates"] = [{"fn": "count", "field": None, "as": "count"}]
    prompt = (_english if english else _korean)(rng, draft, shape, group)
    classes = ",".join(sorted(set(draft.classes))) or "plain"
    case_class = f"{classes}|{shape}|{'en' if english else 'ko'}"
    return Generated(case_class, rng.choice(ASKERS), prompt, plan, shape, "en" if english else "ko")


def _amount(rng: random.Random, draft: _Draft) -> None:
    fld = (
        "amount"
        if draft.entity == "premium_payments"
        else rng.choice(("monthly_premium", "sum_insured"))
    )
    if any(f["field"] == fld for f in draft.filters):
        return
    value = rng.choice(AMOUNT_VALUES[fld])
    op = rng.choice(("gte", "gt", "lte", "lt", "eq") if fld != "sum_insured" else
                    ("gte", "gt", "lte", "lt"))  # fmt: skip
    ko_words, en_words = AMOUNT_FIELDS[fld]
    ko_form, ko_text = rng.choice(sorted(korean_forms(value).items()))
    en_form, en_text = rng.choice(sorted(english_forms(value).items()))
    space = rng.choice(("", " "))
    ko_bound = rng.choice(KO_BOUNDS[op]).format(n=f"{ko_text}{space}원")
    en_bound = rng.choice(EN_BOUNDS[op]).format(n=f"{en_text} won" if "k" not in en_form
                                                 and "M" not in en_form else en_text)  # fmt: skip
    particle = rng.choice(("", "이 ", "가 "))
    word = rng.choice(ko_words)
    draft.ko.append(f"{word}{'가 ' if particle and word.endswith('료') else ' '}{ko_bound}인")
    draft.en.append(f"a {rng.choice(en_words)} of {en_bound}")
    draft.filters.append({"field": fld, "op": op, "value": value})
    draft.classes.append(f"amount:{ko_form}/{en_form}:{op}")


def _age(rng: random.Random, draft: _Draft) -> None:
    value = rng.choice(sorted(ENGLISH_WORDS))
    op = rng.choice(("gte", "gt", "lte", "lt"))
    unit = rng.choice(("세", "살"))
    ko = rng.choice(KO_BOUNDS[op]).format(n=f"{value}{unit}")
    number = ENGLISH_WORDS[value] if rng.random() < 0.3 else str(value)
    en = {"gte": f"aged {number} or older", "gt": f"older than {number}",
          "lte": f"aged {number} or younger", "lt": f"younger than {number}"}[op]  # fmt: skip
    draft.ko.append(f"나이 {ko}인")
    draft.en.append(en)
    draft.filters.append({"field": "age", "op": op, "value": value})
    draft.classes.append(f"age:{op}")


# A year with its direction, per date: the Korean and English wording of each direction.
YEAR_WORDS = {
    "joined_on": (
        {"before": "{y}년 전에 가입한", "from": "{y}년 이후 가입한", "in": "{y}년에 가입한"},
        {"before": "who joined before {y}", "from": "who joined since {y}",
         "in": "who joined in {y}"},
    ),
    "start_date": (
        {"before": "{y}년 전에 시작한", "from": "{y}년 이후 계약한", "in": "{y}년에 계약한"},
        {"before": "that started before {y}", "from": "that started since {y}",
         "in": "that started in {y}"},
    ),
}  # fmt: skip


def _join_year(rng: random.Random, draft: _Draft) -> None:
    _year(rng, draft, "joined_on")


def _start_year(rng: random.Random, draft: _Draft) -> None:
    _year(rng, draft, "start_date")


def _year(rng: random.Random, draft: _Draft, fld: str) -> None:
    year = rng.randint(2018, 2025)
    how = rng.choice(("before", "from", "in"))
    ko, en = YEAR_WORDS[fld]
    draft.filters.append(_year_filter(fld, year, how))
    draft.ko.append(ko[how].format(y=year))
    draft.en.append(en[how].format(y=year))
    draft.classes.append(f"year:{how}")


def _year_filter(fld: str, year: int, how: str) -> dict:
    if how == "before":
        return {"field": fld, "op": "lt", "value": f"{year}-01-01"}
    if how == "from":
        return {"field": fld, "op": "gte", "value": f"{year}-01-01"}
    return {"field": fld, "op": "between", "value": [f"{year}-01-01", f"{year}-12-31"]}


def _quarter(rng: random.Random, draft: _Draft) -> None:
    quarter = rng.choice((1, 2))
    first, last = 3 * quarter - 2, 3 * quarter
    months = [f"{AS_OF_YEAR}-{first:02d}", f"{AS_OF_YEAR}-{last:02d}"]
    draft.filters.append({"field": "due_month", "op": "between", "value": months})
    draft.ko.append(rng.choice((f"{quarter}분기", f"올해 {quarter}분기", f"Q{quarter}")))
    draft.en.append(rng.choice((f"in Q{quarter}", f"in Q{quarter} {AS_OF_YEAR}")))
    draft.classes.append("period:quarter")


def _status(rng: random.Random, draft: _Draft) -> None:
    if any(f["field"] == "status" for f in draft.filters):
        return
    value, (ko, en) = rng.choice(sorted(STATUS_WORDS[draft.entity].items()))
    draft.filters.append({"field": "status", "op": "eq", "value": value})
    draft.ko.append(rng.choice(ko))
    draft.en.append(rng.choice(en))
    draft.classes.append("status")


def _grade(rng: random.Random, draft: _Draft) -> None:
    draft.filters.append({"field": "grade", "op": "eq", "value": "VIP"})
    draft.ko.append("VIP")
    draft.en.append("VIP")
    draft.classes.append("grade")


# -- rendering -------------------------------------------------------------------------------------


def _korean(rng: random.Random, draft: _Draft, shape: str, group) -> str:
    noun = NOUNS[draft.entity][0]
    conditions = " ".join(draft.ko)
    head = f"{conditions} {noun}".strip()
    polite = rng.choice(("", "좀 ", ""))
    if shape == "rows":
        tail = rng.choice(("목록", "보여줘", "보여 주세요", "알려줘요", "목록 뽑아줘"))
        return f"{head} {polite}{tail}"
    counter = "명" if draft.entity == "customers" else "건"
    if shape == "count":
        tail = rng.choice(
            (f"몇 {counter}이야?", f"몇 {counter}인가요", "수", f"몇 {counter}이에요?")
        )
        return f"{head} {tail}"
    _, _, ko_dim, _ = group
    marker = rng.choice(("별", "마다"))
    return f"{ko_dim}{marker} {head} 수"


def _english(rng: random.Random, draft: _Draft, shape: str, group) -> str:
    noun = NOUNS[draft.entity][1]
    if rng.random() < 0.2:  # a typo the reader should correct
        noun = {"customers": "custmers", "contracts": "contrcts"}.get(noun, noun)
    status = [c for c in draft.en if not c.startswith(("a ", "who ", "that ", "aged", "older",
                                                        "younger", "in Q"))]  # fmt: skip
    rest = [c for c in draft.en if c not in status]
    described = " ".join([*status, noun]).strip()
    tail = " ".join(c if c.startswith(("who ", "that ", "in Q", "aged", "older", "younger"))
                    else f"with {c}" for c in rest)  # fmt: skip
    body = f"{described} {tail}".strip()
    please = rng.choice(("", "", " please", " pls"))
    if shape == "rows":
        return f"{rng.choice(('show', 'list', 'show me'))} {body}{please}"
    if shape == "count":
        return f"how many {body}{please}"
    _, _, _, en_dim = group
    return f"number of {body} {rng.choice(('by', 'per'))} {en_dim}{please}"


# -- judging ---------------------------------------------------------------------------------------


def truth(case: Generated) -> dict:
    """The composed plan's answer, as the same asker: the generator's ground truth."""
    from kb.selectors import stakeholder_get
    from kb.vpd import execute_plan

    return execute_plan(case.plan, stakeholder=stakeholder_get(case.stakeholder_id))


def outcome(case: Generated) -> tuple[str, object]:
    """right / refused / wrong, with the reader's answer or refusal."""
    from kb.answering import answer_question
    from tests.kb.selectai_suite import refusals

    try:
        answer = answer_question(stakeholder_id=case.stakeholder_id, prompt=case.prompt, limit=100)
    except refusals() as exc:
        return REFUSED, exc
    if not answer.get("columns"):
        return REFUSED, answer  # a help answer: nothing claimed
    return (RIGHT if same_answer(case, truth(case), answer) else WRONG), answer


def same_answer(case: Generated, expected: dict, answer: dict) -> bool:
    key = KEYS[case.plan["entity"]]
    if case.shape == "grouped":
        return _groups(expected) == _groups(answer)
    if case.shape == "count":
        return _count(expected, key) == _count(answer, key)
    if expected["truncated"]:
        return answer["truncated"] and len(answer["rows"]) == len(expected["rows"])
    got = {row.get(key) for row in answer["rows"]}
    return got == {row[key] for row in expected["rows"]} and not answer["truncated"]


def _count(answer: dict, key: str) -> int | None:
    names = [c["name"] for c in answer["columns"]]
    if "count" in names and len(answer["rows"]) == 1 and key not in names:
        return answer["rows"][0]["count"]
    if key in names and not answer["truncated"]:
        return len(answer["rows"])
    return None


def _groups(answer: dict) -> dict | None:
    names = [c["name"] for c in answer["columns"]]
    measure = next((n for n in names if n in ("count", "customer_count", "contract_count")), None)
    if measure is None:
        return None
    keys = [n for n in names if n != measure]
    return {tuple(row[k] for k in keys[:1]): row[measure] for row in answer["rows"]}
