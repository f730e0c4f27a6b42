"""What the reader says back, in the asker's language: labels, the summary of a plan, notes,
help and scope wording.

The parser (kb.selectai.parser) decides the plan; this module only puts it into words, so the
wording can change without touching how questions are read. Korean is the first language; an
English question gets the same words in English, with coded values glossed ("미납 (unpaid)").
"""

from __future__ import annotations

import re
from typing import Any

from kb.catalogue import CONTRACTS, CUSTOMERS, ENTITIES, PAYMENTS, VALUE_GLOSSES
from kb.josa import josa

from .vocabulary import Vocabulary

DIM_LABELS = {"branch": "지점", "planner": "설계사", "product": "상품", "category": "카테고리",
              "grade": "등급", "status": "상태", "gender": "성별", "age_group": "연령대",
              "customer": "고객", "contract": "계약", "month": "월", "region": "지역"}  # fmt: skip
DIM_LABELS_EN = {"branch": "branch", "planner": "planner", "product": "product",
                 "category": "category", "grade": "grade", "status": "status", "gender": "gender",
                 "age_group": "age group", "customer": "customer", "contract": "contract",
                 "month": "month", "region": "region"}  # fmt: skip
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
    "region": ["region"],
}
UNIT_COUNTERS = {"customer": "명", "planner": "명", "branch": "곳"}
SCOPE_BY_ROLE = {"planner": "담당 고객 기준", "branch_manager": "우리 지점 기준",
                 "hq_analyst": "전사 기준"}  # fmt: skip
SCOPE_BY_ROLE_EN = {"planner": "your own customers", "branch_manager": "your branch",
                    "hq_analyst": "the whole company"}  # fmt: skip
DEFAULT_SCOPE = "조회 권한 범위 기준"
DEFAULT_SCOPE_EN = "what you may see"

MEASURE_LABELS = {"amount": "보험료", "monthly_premium": "월보험료", "sum_insured": "가입금액",
                  "age": "나이"}  # fmt: skip
MEASURE_LABELS_EN = {"amount": "premium", "monthly_premium": "monthly premium",
                     "sum_insured": "sum insured", "age": "age"}  # fmt: skip
AGG_LABELS = {"sum": "합계", "avg": "평균", "min": "최소", "max": "최대", "count": "수"}
AGG_LABELS_EN = {"sum": "total", "avg": "average", "min": "lowest", "max": "highest",
                 "count": "number"}  # fmt: skip

HELP_EXAMPLES = [
    "담당 고객 목록 보여줘",
    "고객 C0001 상세 정보",
    "이번 달 미납 보험료",
    "최근 3개월 자동차보험 납입 내역",
    "다음 달 만기 예정 계약",
    "지점별 월보험료 합계",
    "보험료 상위 5명 고객",
    "연령대별 고객 수",
    "VIP 고객의 유지 계약",
]
HELP_EXAMPLES_EN = [
    "list my customers",
    "details of customer C0001",
    "unpaid premiums this month",
    "contracts maturing next month",
    "monthly premium total by branch",
    "number of customers by age group",
]
OP_LABELS = {"gte": "이상", "gt": "초과", "lte": "이하", "lt": "미만", "eq": "", "between": "사이",
             "ne": "제외", "startswith": " 시작", "endswith": " 끝남",
             "contains": " 포함"}  # fmt: skip
OP_LABELS_EN = {"gte": "at least", "gt": "over", "lte": "at most", "lt": "under", "eq": "",
                "between": "between", "ne": "except", "startswith": "starting with",
                "endswith": "ending with", "contains": "containing"}  # fmt: skip

# Why a question could not be read at all, in both languages (kb.answering refuses it).
UNREADABLE = {
    "no_question": ("질문이 비어 있습니다.", "The question is empty."),
    "no_sql": (
        "SQL 문은 실행하지 않습니다. 알고 싶은 내용을 자연어로 물어봐 주세요.",
        "SQL is never run. Ask in words what you want to know.",
    ),
    "no_domain": (
        "질문에서 고객·계약·보험료와 관련된 내용을 찾지 못했습니다.",
        "Nothing in the question is about customers, contracts or premium payments.",
    ),
    "parse_failed": (
        "질문을 해석하는 중 문제가 생겼습니다. 다른 표현으로 물어봐 주세요.",
        "The question could not be read. Please ask it in other words.",
    ),
}
HELP_FOOTER = (
    "고객·계약·보험료(납입/미납)에 대한 질문을 이해할 수 있습니다.",
    "It answers questions about customers, contracts and premium payments (paid or unpaid).",
)
UNMAPPABLE_SUMMARY = (
    "해석할 수 없는 질문입니다, {scope}",
    "The question could not be read ({scope})",
)

# Notes an answer carries, by key: what a convention or the policy did to the question.
NOTES = {
    "widening": (
        "'전체/모든/정책 무시' 같은 표현은 조회 범위를 넓히지 않습니다 ({scope}).",
        "Words such as 'all', 'every' or 'ignore the policy' do not widen what you may see "
        "({scope}).",
    ),
    "paid": (
        "받은·들어온 보험료와 납입 건수·총액은 납입된 건만 셉니다(미납 제외).",
        "Money received, and counts or totals of payments made, count paid payments only "
        "(unpaid excluded).",
    ),
    "unpaid_customers": (
        "고객별로 묶었으므로 결과 행 수가 미납 고객 수입니다.",
        "One row per customer: the number of rows is the number of customers with unpaid premiums.",
    ),
    "in_force_default": (
        "보험료·가입금액 합계와 순위는 따로 묻지 않으면 유지 계약만 셉니다(해지·실효·만기 제외, "
        "'모든 상태'로 물으면 모두 포함).",
        "Premium totals and rankings count in-force contracts (유지) unless asked otherwise; "
        "cancelled, lapsed and matured ones are left out (ask for 'all statuses' to include "
        "them).",
    ),
}


def text_condition(label: str, value: str, op: str) -> str:
    """A condition on a text column, in Korean: "고객명 '김'으로 시작", "전화번호 '1234' 포함"."""
    shown = f"'{value}'"
    if op in ("startswith", "endswith"):
        return f"{label} {josa(shown, '으로/로')}{OP_LABELS[op]}"
    return f"{label} {shown}{OP_LABELS[op]}"


def say(language: str, ko: str, en: str) -> str:
    return en if language == "en" else ko


def scope_text(role: object, language: str = "ko") -> str:
    """How the asker's scope is said ("우리 지점 기준" / "your branch")."""
    role = role if isinstance(role, str) else ""
    if language == "en":
        return SCOPE_BY_ROLE_EN.get(role, DEFAULT_SCOPE_EN)
    return SCOPE_BY_ROLE.get(role, DEFAULT_SCOPE)


def note_text(key: str, language: str, scope: str) -> str:
    ko, en = NOTES[key]
    return say(language, ko, en).format(scope=scope)


_AGE_BAND = re.compile(r"^(\d+)대$")


def gloss(value: object, language: str) -> str:
    """A stored value as an English answer shows it: "미납 (unpaid)", "30대 (30s)"; as it is in
    Korean and where it has no gloss."""
    text = str(value)
    if language != "en":
        return text
    if text in VALUE_GLOSSES:
        return f"{text} ({VALUE_GLOSSES[text]})"
    band = _AGE_BAND.match(text)
    return f"{text} ({band.group(1)}s)" if band else text


def filter_text(plan: dict, family: str, vocab: Vocabulary, language: str = "ko") -> str:
    """The plan's conditions in words ("VIP 등급 강남지점 제외" / "grade VIP, except 강남지점")."""
    parts: list[str] = []
    for flt in plan["filters"]:
        part = _describe_filter(flt, family, vocab, language)
        if part and flt["op"] in ("ne", "not_in"):
            part = say(language, f"{part} 제외", f"except {part}")
        if part:
            parts.append(part)
    return say(language, " ".join(parts), ", ".join(parts))


def _money(value: object, language: str) -> str:
    return say(language, f"{value:,}원", f"KRW {value:,}")


def _describe_filter(flt: dict, family: str, vocab: Vocabulary, language: str) -> str:  # noqa: C901
    fld, op, value = flt["field"], flt["op"], flt["value"]
    values = [str(v) for v in (value if isinstance(value, list) else [value])]
    joined = "/".join(gloss(v, language) for v in values)
    en = language == "en"
    ops = OP_LABELS_EN if en else OP_LABELS
    label = ENTITIES[CUSTOMERS].fields[fld].label_in(language) if fld in (
        "phone", "rrn", "customer_name", "birth_date", "joined_on") else ""  # fmt: skip
    personal = fld in ("phone", "rrn") or (fld == "customer_name" and op not in ("eq", "in"))
    if personal and op in ops and op != "ne":
        if en:
            return f"{label} {ops[op]} '{joined}'".replace("  ", " ")
        return text_condition(label, joined, op)
    if fld == "birth_date" and op in ("month_day_between", "month_day_in"):
        shown = "~".join(values) if op == "month_day_between" else ", ".join(values[:3])
        more = op == "month_day_in" and len(values) > 3
        return say(language, f"생일 {shown}{' 등' if more else ''}",
                   f"birthday {shown}{' and others' if more else ''}")  # fmt: skip
    if fld == "birth_date" and op == "between":
        first, last = values[0][:4], values[1][:4]
        if first == last:
            return say(language, f"{first}년생", f"born in {first}")
        return say(language, f"{first}~{last}년생", f"born {first}–{last}")
    if fld == "branch_id":
        return "/".join(vocab.branches.get(v, v) for v in values)
    if fld == "planner_id":
        names = "/".join(vocab.planners.get(v, v) for v in values)
        return say(language, f"{names} 설계사", f"planner {names}")
    if fld == "product_code":
        return "/".join(vocab.products[v].name for v in values if v in vocab.products)
    if fld in ("category", "grade"):
        noun = {"category": ("카테고리", "category"), "grade": ("등급", "grade")}[fld]
        return say(language, f"{joined} {noun[0]}", f"{noun[1]} {joined}")
    if fld == "age_group":
        return say(language, joined, f"age group {joined}")
    if fld == "age":
        if op == "between":
            return say(language, f"나이 {'~'.join(values)}", f"aged {'–'.join(values)}")
        return say(language, f"나이 {joined}세 {ops[op]}".strip(), f"aged {ops[op]} {joined}")
    if fld == "gender":
        return say(language, "여성" if value == "F" else "남성", "women" if value == "F" else "men")
    if fld in ("customer_name", "customer_id", "contract_id"):
        return joined
    if fld in ("monthly_premium", "amount", "sum_insured"):
        measure = (MEASURE_LABELS_EN if en else MEASURE_LABELS)[fld]
        if op == "between":
            low, high = _money(value[0], language), _money(value[1], language)
            return f"{measure} {low}~{high}" if not en else f"{measure} {low}–{high}"
        if en:
            return f"{measure} {ops[op]} {_money(value, language)}".replace("  ", " ")
        return f"{measure} {_money(value, language)} {ops[op]}".strip()
    if fld == "status" and family != "expiring" and ("미납" not in values or family == "related"):
        return say(language, joined, "/".join(VALUE_GLOSSES.get(v, v) for v in values))
    if fld in ("birth_date", "joined_on") and op != "between":
        return say(language, f"{label} {joined} {ops[op]}".strip(), f"{label} {ops[op]} {joined}")
    return ""


def related_text(plan: dict, vocab: Vocabulary, language: str = "ko") -> str:
    """ "미납 보험료 납입이 없는" / "without unpaid premium payments": the rows a row must have
    or lack."""
    parts = []
    for related in plan.get("related") or ():
        conditions = filter_text(
            {"filters": related["filters"], "entity": related["entity"]}, "related", vocab,
            language,
        )  # fmt: skip
        spec = ENTITIES[related["entity"]]
        if language == "en":
            what = f"{spec.label_en}{f' ({conditions})' if conditions else ''}"
            if related.get("at_least"):
                parts.append(f"with at least {related['at_least']} {what}")
            else:
                parts.append(f"{'with' if related['exists'] else 'without'} {what}")
            continue
        if related.get("at_least"):
            parts.append(f"{conditions} {spec.label} {related['at_least']}건 이상인".strip())
            continue
        have = "있는" if related["exists"] else "없는"
        parts.append(f"{conditions} {josa(spec.label, '이/가')} {have}".strip())
    return say(language, " ".join(parts), ", ".join(parts))


def subject(plan: dict, family: str, dims: list[str], language: str = "ko") -> str:
    """What the answer is ("지점별 보험료 합계"); `dims` in the order the plan groups them."""
    if language == "en":
        return _subject_en(plan, family, dims)
    entity = plan["entity"]
    unpaid = _unpaid(plan)
    if family == "customer_detail":
        return "고객 상세"
    if family == "expiring":
        return "만기 예정 계약"
    if plan["aggregates"]:
        what = ", ".join(aggregate_text(entity, a, unpaid) for a in plan["aggregates"])
        if family == "top_n" and dims:
            direction = "상위" if plan["order_by"][0]["direction"] == "desc" else "하위"
            unit = dims[0]
            counter = UNIT_COUNTERS.get(unit, "개")
            return f"{what} {direction} {plan['limit']}{counter} {DIM_LABELS[unit]}"
        by = "".join(f"{DIM_LABELS[d]}별 " for d in dims)
        return f"{by}{what}"
    noun = {CUSTOMERS: "고객 목록", CONTRACTS: "계약 목록", PAYMENTS: "보험료 납입 내역"}[entity]
    if unpaid:
        noun = "미납 보험료"
    if family == "top_n" and plan["order_by"]:
        order = plan["order_by"][0]
        direction = "상위" if order["direction"] == "desc" else "하위"
        noun = {CUSTOMERS: "고객", CONTRACTS: "계약"}.get(entity, noun)
        measure = MEASURE_LABELS.get(order["field"], order["field"])
        counter = "명" if entity == CUSTOMERS else "건"
        return f"{measure} {direction} {plan['limit']}{counter} {noun}"
    return noun


def _has_status(plan: dict) -> bool:
    return any(x["field"] == "status" for x in plan["filters"])


def _unpaid(plan: dict) -> bool:
    return any(x["field"] == "status" and x["value"] == "미납" for x in plan["filters"])


def _subject_en(plan: dict, family: str, dims: list[str]) -> str:
    entity, unpaid = plan["entity"], _unpaid(plan)
    if family == "customer_detail":
        return "customer details"
    if family == "expiring":
        return "contracts maturing"
    if plan["aggregates"]:
        what = ", ".join(aggregate_text(entity, a, unpaid, "en") for a in plan["aggregates"])
        if family == "top_n" and dims:
            direction = "top" if plan["order_by"][0]["direction"] == "desc" else "bottom"
            unit = DIM_LABELS_EN[dims[0]]
            return (
                f"{direction} {plan['limit']} {unit}{'s' if plan['limit'] != 1 else ''} by {what}"
            )
        by = " and ".join(DIM_LABELS_EN[d] for d in dims)
        return f"{what} by {by}" if by else what
    noun = {CUSTOMERS: "customers", CONTRACTS: "contracts", PAYMENTS: "premium payments"}[entity]
    if unpaid:
        noun = "unpaid premiums"
    if family == "top_n" and plan["order_by"]:
        order = plan["order_by"][0]
        direction = "top" if order["direction"] == "desc" else "bottom"
        measure = MEASURE_LABELS_EN.get(order["field"], order["field"])
        return f"{direction} {plan['limit']} {noun} by {measure}"
    return noun


def aggregate_text(entity: str, agg: dict, unpaid: bool, language: str = "ko") -> str:
    if language == "en":
        if agg["fn"] == "count":
            if entity == PAYMENTS:
                return "number of unpaid payments" if unpaid else "number of payments"
            return "number of customers" if entity == CUSTOMERS else "number of contracts"
        label = MEASURE_LABELS_EN.get(agg["field"], agg["field"])
        if unpaid and agg["field"] == "amount":
            label = "unpaid amount"
        return f"{AGG_LABELS_EN[agg['fn']]} {label}"
    if agg["fn"] == "count":
        if entity == PAYMENTS:
            return "미납 건수" if unpaid else "납입 건수"
        return "고객 수" if entity == CUSTOMERS else "계약 건수"
    label = MEASURE_LABELS.get(agg["field"], agg["field"])
    if unpaid and agg["field"] == "amount":
        label = "미납 금액"
    return f"{label} {AGG_LABELS[agg['fn']]}"


def agg_label(agg: dict) -> str:
    if agg["fn"] == "count":
        return "건수"
    return f"{MEASURE_LABELS.get(agg['field'], agg['field'])} {AGG_LABELS[agg['fn']]}"


def summary_head(plan: dict, family: str, vocab: Vocabulary, language: str, period: str) -> str:
    """The answer's subject with every condition of `plan` and its period, in `language`:
    "2026-06 미납 보험료" / "Unpaid premiums, 2026-06"."""
    dims = [d for d, fields in DIM_FIELDS.items() if fields[0] in plan["group_by"]]
    dims.sort(key=lambda d: plan["group_by"].index(DIM_FIELDS[d][0]))
    conditions = filter_text(plan, family, vocab, language)
    related = related_text(plan, vocab, language) if plan.get("related") else ""
    what = subject(plan, family, dims, language)
    if language != "en":
        by = ""
        if plan["aggregates"] and dims and family != "top_n":
            # "지점별 유지 계약 건수": the grouping first, then what is counted.
            by, what = (
                "".join(f"{DIM_LABELS[d]}별 " for d in dims).strip(),
                subject(plan, family, [], language),
            )
        if plan["entity"] == CONTRACTS and "계약" not in what and _has_status(plan):
            conditions = f"{conditions} 계약"  # "유지 계약 월보험료 합계"
        return " ".join(x for x in (period, by, conditions, related, what) if x)
    head = what[:1].upper() + what[1:]
    if related:
        head = f"{head} {related}"
    details = "; ".join(x for x in (conditions, period) if x)
    return f"{head} ({details})" if details else head


def understood_en(plan: dict, vocab: Vocabulary) -> list[str]:
    """What was understood, in English, from the plan itself (the reader's own notes of what it
    understood are Korean)."""
    spec = ENTITIES[plan["entity"]]
    out = [spec.label_en]
    for flt in plan["filters"]:
        part = _describe_filter(flt, "related", vocab, "en")
        field = spec.fields.get(flt["field"])
        if not part and field is not None:
            shown = flt["value"]
            shown = "–".join(map(str, shown)) if isinstance(shown, list) else str(shown)
            op = OP_LABELS_EN.get(flt["op"], flt["op"])
            part = f"{field.label_en} {op} {shown}".replace("  ", " ")
        if part:
            out.append(f"except {part}" if flt["op"] in ("ne", "not_in") else part)
    for dim, fields in DIM_FIELDS.items():
        if fields[0] in plan["group_by"]:
            out.append(f"by {DIM_LABELS_EN[dim]}")
    for agg in plan["aggregates"]:
        out.append(aggregate_text(plan["entity"], agg, _unpaid(plan), "en"))
    if plan.get("related"):
        out.append(related_text(plan, vocab, "en"))
    return out


# A refusal, in the question's language: what could not be used, what was understood, what the
# KB holds (for data it has not got) and questions it would answer instead.
REFUSAL_TEXT: dict[str, dict[str, Any]] = {
    "ko": {
        "unread_words": "질문의 일부를 반영할 수 없어 답하지 않았습니다. 쓸 수 없었던 말: {words}.",
        "out_of_data": "KB에는 {words}에 해당하는 데이터가 없습니다.",
        "understood": " 이해한 것: {understood}.",
        "holds": " KB가 가진 데이터: {catalogue}.",
        "suggest": " 이렇게 물어보면 답할 수 있습니다: {suggestions}.",
        "ops": {"month_day_between": "월·일 범위", "month_day_in": "월·일 중 하나",
                "eq": "=", "ne": "제외", "in": "중 하나", "not_in": "제외", "gte": "이상",
                "gt": "초과", "lte": "이하", "lt": "미만", "between": "범위",
                "startswith": "시작", "endswith": "끝남", "contains": "포함"},
    },
    "en": {
        "unread_words": "Not answered: part of the question could not be used: {words}.",
        "out_of_data": "The KB holds no data on {words}.",
        "understood": " Understood: {understood}.",
        "holds": " The KB holds: {catalogue}.",
        "suggest": " Questions it can answer: {suggestions}.",
        "ops": {"month_day_between": "month and day between",
                "month_day_in": "month and day one of",
                "eq": "=", "ne": "except", "in": "one of", "not_in": "except", "gte": ">=",
                "gt": ">", "lte": "<=", "lt": "<", "between": "between",
                "startswith": "starts with", "endswith": "ends with", "contains": "contains"},
    },
}  # fmt: skip


def refusal_message(refusal, language: str) -> str:
    """The refusal in words: the words quoted, what was understood, the KB's data, other
    questions to ask."""
    text = REFUSAL_TEXT["en" if language == "en" else "ko"]
    words = ", ".join(f"'{w}'" for w in refusal.words)
    message = text[refusal.reason].format(words=words)
    understood = understood_text(refusal, language)
    if understood:
        message += text["understood"].format(understood=understood)
    if refusal.reason == "out_of_data" or not refusal.entity:
        message += text["holds"].format(catalogue=catalogue_text(language))
    if refusal.suggestions:
        quoted = ", ".join(f'"{s}"' for s in refusal.suggestions)
        message += text["suggest"].format(suggestions=quoted)
    return message


def suggestions_text(suggestions, language: str) -> str:
    """ "이렇게 물어보면 답할 수 있습니다: "…", "…"." in `language`."""
    text = REFUSAL_TEXT["en" if language == "en" else "ko"]
    quoted = ", ".join(f'"{s}"' for s in suggestions)
    return text["suggest"].format(suggestions=quoted).strip()


def understood_text(refusal, language: str) -> str:
    if not refusal.entity:
        return ""
    spec = ENTITIES[refusal.entity]
    ops = REFUSAL_TEXT["en" if language == "en" else "ko"]["ops"]
    parts = [spec.label_in(language)]
    for item in refusal.understood:
        field = spec.fields.get(item["field"])
        if field is None:
            continue
        value = item["value"]
        shown = "~".join(map(str, value)) if isinstance(value, list) else str(value)
        if language == "en" and any("\uac00" <= ch <= "\ud7a3" for ch in shown):
            parts.append(field.label_in(language))  # the value is Korean data: name the field
        else:
            label = field.label_in(language)
            if language != "en" and item["op"] in ("startswith", "endswith", "contains"):
                parts.append(text_condition(label, shown, item["op"]))
            else:
                parts.append(f"{label} {ops.get(item['op'], '')} {shown}".strip())
    return ", ".join(parts)


def catalogue_text(language: str) -> str:
    """Each entity with the fields it adds ("고객(고객 ID, 고객명, …); 계약(…)")."""
    seen: set[str] = set()
    parts = []
    for spec in ENTITIES.values():
        own = [f for f in spec.fields.values() if f.label not in seen and not f.derived]
        seen.update(f.label for f in spec.fields.values())
        labels = ", ".join(f.label_in(language) for f in own)
        parts.append(f"{spec.label_in(language)}({labels})")
    return "; ".join(parts)
