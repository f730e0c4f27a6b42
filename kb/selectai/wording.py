"""What the parser says back, in Korean: labels, the summary of a plan, help and scope wording.

The parser (kb.selectai.parser) decides the plan; this module only puts it into words, so the
wording can change (or be translated) without touching how questions are read.
"""

from __future__ import annotations

from typing import Any

from kb.catalogue import CONTRACTS, CUSTOMERS, ENTITIES, PAYMENTS

from .vocabulary import Vocabulary

DIM_LABELS = {"branch": "지점", "planner": "설계사", "product": "상품", "category": "카테고리",
              "grade": "등급", "status": "상태", "gender": "성별", "age_group": "연령대",
              "customer": "고객", "contract": "계약", "month": "월", "region": "지역"}  # fmt: skip
UNIT_COUNTERS = {"customer": "명", "planner": "명", "branch": "곳"}
SCOPE_BY_ROLE = {"planner": "담당 고객 기준", "branch_manager": "우리 지점 기준",
                 "hq_analyst": "전사 기준"}  # fmt: skip
DEFAULT_SCOPE = "조회 권한 범위 기준"

MEASURE_LABELS = {"amount": "보험료", "monthly_premium": "월보험료", "sum_insured": "가입금액",
                  "age": "나이"}  # fmt: skip
AGG_LABELS = {"sum": "합계", "avg": "평균", "min": "최소", "max": "최대", "count": "수"}

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
OP_LABELS = {"gte": "이상", "gt": "초과", "lte": "이하", "lt": "미만", "eq": "", "between": "사이",
             "ne": "제외", "startswith": "(으)로 시작", "endswith": "(으)로 끝남",
             "contains": " 포함"}  # fmt: skip
UNMAPPABLE_SUMMARY = "해석할 수 없는 질문입니다, {scope}"
HELP_FOOTER = "고객·계약·보험료(납입/미납)에 대한 질문을 이해할 수 있습니다."
NO_QUESTION = "질문이 비어 있습니다."
NO_SQL = "SQL 문은 실행하지 않습니다. 알고 싶은 내용을 자연어로 물어봐 주세요."
NO_DOMAIN = "질문에서 고객·계약·보험료와 관련된 내용을 찾지 못했습니다."
PARSE_FAILED = "질문을 해석하는 중 문제가 생겼습니다. 다른 표현으로 물어봐 주세요."
WIDENING_NOTE = "'전체/모든/정책 무시' 같은 표현은 조회 범위를 넓히지 않습니다 ({scope})."


def filter_text(plan: dict, family: str, vocab: Vocabulary) -> str:
    """The plan's conditions in words ("VIP 등급 강남지점 제외")."""
    parts: list[str] = []
    for flt in plan["filters"]:
        before = len(parts)
        _describe_filter(flt, family, parts, vocab)
        if len(parts) > before and flt["op"] in ("ne", "not_in"):
            parts[-1] = f"{parts[-1]} 제외"
    return " ".join(p for p in parts if p)


def _describe_filter(flt: dict, family: str, parts: list[str], vocab: Vocabulary) -> None:
    fld, op, value = flt["field"], flt["op"], flt["value"]
    values = [str(v) for v in (value if isinstance(value, list) else [value])]
    joined = "/".join(values)
    personal = fld in ("phone", "rrn") or (fld == "customer_name" and op not in ("eq", "in"))
    if personal and op in OP_LABELS and op != "ne":
        parts.append(f"{ENTITIES[CUSTOMERS].fields[fld].label} '{joined}'{OP_LABELS[op]}")
    elif fld == "birth_date" and op in ("month_day_between", "month_day_in"):
        shown = "~".join(values) if op == "month_day_between" else ", ".join(values[:3])
        parts.append(f"생일 {shown}{' 등' if op == 'month_day_in' and len(values) > 3 else ''}")
    elif fld == "birth_date" and op == "between":
        first, last = values[0][:4], values[1][:4]
        parts.append(f"{first}년생" if first == last else f"{first}~{last}년생")
    elif fld == "branch_id":
        parts.append("/".join(vocab.branches.get(v, v) for v in values))
    elif fld == "planner_id":
        parts.append("/".join(vocab.planners.get(v, v) for v in values) + " 설계사")
    elif fld == "product_code":
        parts.append("/".join(vocab.products[v].name for v in values if v in vocab.products))
    elif fld == "category":
        parts.append(f"{joined} 카테고리")
    elif fld == "grade":
        parts.append(f"{joined} 등급")
    elif fld == "age_group":
        parts.append(joined)
    elif fld == "age":
        text = "~".join(values) if op == "between" else f"{joined}세 {OP_LABELS[op]}"
        parts.append(f"나이 {text}".strip())
    elif fld == "gender":
        parts.append("여성" if value == "F" else "남성")
    elif fld in ("customer_name", "customer_id", "contract_id"):
        parts.append(joined)
    elif fld in ("monthly_premium", "amount", "sum_insured"):
        if op == "between":
            parts.append(f"{MEASURE_LABELS[fld]} {value[0]:,}~{value[1]:,}원")
        else:
            parts.append(f"{MEASURE_LABELS[fld]} {value:,}원 {OP_LABELS[op]}")
    elif fld == "status" and family != "expiring" and "미납" not in values:
        parts.append(joined)
    elif fld in ("birth_date", "joined_on") and op != "between":
        parts.append(f"{ENTITIES[CUSTOMERS].fields[fld].label} {joined} {OP_LABELS[op]}".strip())


def related_text(plan: dict, vocab: Vocabulary) -> str:
    """ "미납 보험료 납입이 없는", "유지 계약이 있는": the rows a row must have or lack."""
    parts = []
    for related in plan.get("related") or ():
        conditions = filter_text(
            {"filters": related["filters"], "entity": related["entity"]}, "", vocab
        )
        label = ENTITIES[related["entity"]].label
        if related.get("at_least"):
            parts.append(f"{conditions} {label} {related['at_least']}건 이상인".strip())
            continue
        have = "있는" if related["exists"] else "없는"
        parts.append(f"{conditions} {label}이(가) {have}".strip())
    return " ".join(parts)


def subject(plan: dict, family: str, dims: list[str]) -> str:
    """What the answer is ("지점별 보험료 합계"); `dims` in the order the plan groups them."""
    entity = plan["entity"]
    unpaid = any(x["field"] == "status" and x["value"] == "미납" for x in plan["filters"])
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


def aggregate_text(entity: str, agg: dict, unpaid: bool) -> str:
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
                "startswith": "(으)로 시작", "endswith": "(으)로 끝남", "contains": "포함"},
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
            parts.append(f"{field.label_in(language)} {ops.get(item['op'], '')} {shown}".strip())
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


def summary_counted(head: str, rows: int, truncated: bool, language: str) -> str:
    """The summary with the answer's real row count ("…, 담당 고객 기준, 3건")."""
    if language == "en":
        return f"{head}, {rows} rows{' (more not shown)' if truncated else ''}"
    return f"{head}, {rows}건{' (이후 생략)' if truncated else ''}"
