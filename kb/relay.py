"""An answer as an agent relays it: written for a person who never sees the plan.

`told` gives an executed answer its words, from the plan that ran and in the asker's language: one
sentence with the figure that answers the question, the scope it covers, and notes saying what the
policy kept out and which statuses a total covers. `answer_text` is the MCP tool's text content:
that sentence, a small markdown table and the masked columns named. `structuredContent` keeps
every row as it is; the text is for reading.
"""

from __future__ import annotations

from kb.catalogue import (
    CONTRACT_STATUSES,
    CONTRACTS,
    CUSTOMERS,
    IN_FORCE_STATUS,
    PAYMENT_STATUSES,
    PAYMENTS,
    in_force_by_default,
)
from kb.josa import josa
from kb.policy import OTHER_PLANNERS, StakeholderSnapshot
from kb.selectai.vocabulary import Vocabulary
from kb.selectai.wording import aggregate_text, gloss, note_text, say, scope_text, summary_head

TABLE_ROWS = 20  # rows the text shows; structuredContent holds all of them
MONEY_FIELDS = frozenset({"amount", "monthly_premium", "sum_insured"})
GLOSSED_COLUMNS = frozenset({"status", "grade", "category", "gender", "age_group"})
_CELL_MAX = 60
_STATUSES = {CONTRACTS: CONTRACT_STATUSES, PAYMENTS: PAYMENT_STATUSES}


def told(
    answer: dict,
    *,
    asker: StakeholderSnapshot,
    vocabulary: Vocabulary,
    language: str,
    outside: tuple[tuple[str, str], ...] = (),
) -> dict:
    """`answer` with its summary said as one sentence (the figure, or the rows, and the scope) and
    its notes completed: what lies outside the asker's scope, which statuses it covers."""
    interpretation = dict(answer.get("interpretation") or {})
    plan = interpretation.get("plan") or {}
    head = summary_head(
        plan,
        interpretation.get("family", ""),
        vocabulary,
        language,
        interpretation.get("period", ""),
    )
    scope = _scope_named(asker, vocabulary, language)
    notes = [_outside_note(field, value, asker, vocabulary, language) for field, value in outside]
    notes += interpretation.get("notes") or []
    coverage = _coverage_note(plan, interpretation.pop("conventions", ()), language, scope)
    if coverage:
        notes.append(coverage)
    interpretation["summary"] = _sentence(answer, plan, head, scope, language)
    interpretation["language"] = language
    if notes:
        interpretation["notes"] = list(dict.fromkeys(notes))
    return {**answer, "interpretation": interpretation}


def _scope_named(asker: StakeholderSnapshot, vocabulary: Vocabulary, language: str) -> str:
    """The asker's scope, named: "윤지유 설계사(KB-P-001) 담당 고객 기준", "강남지점 기준"."""
    if asker.role in ("planner", "branch_manager"):
        return say(language, f"{_own(asker, vocabulary, language)} 기준",
                   _own(asker, vocabulary, language))  # fmt: skip
    return scope_text(asker.role, language)


def _own(asker: StakeholderSnapshot, vocabulary: Vocabulary, language: str) -> str:
    """What the asker may see, named: "윤지유 설계사(KB-P-001) 담당 고객", "강남지점"."""
    if asker.role == "branch_manager" and asker.branch_id:
        branch = vocabulary.branches.get(asker.branch_id, asker.branch_id)
        return say(language, branch, f"branch {branch}")
    name = vocabulary.planners.get(asker.stakeholder_id, "")
    if asker.role != "planner":
        return scope_text(asker.role, language)
    if language == "en":
        who = f"{name} ({asker.stakeholder_id})" if name else asker.stakeholder_id
        return f"customers of planner {who}"
    who = f"{name} 설계사({asker.stakeholder_id})" if name else f"{asker.stakeholder_id} 설계사"
    return f"{who} 담당 고객"


def _outside_note(
    field: str, value: str, asker: StakeholderSnapshot, vocabulary: Vocabulary, language: str
) -> str:
    """ "종로지점은 조회 범위 밖입니다 (강남지점만)": what the asker named and may not see."""
    own = _own(asker, vocabulary, language)
    if field == "branch_id":
        named = vocabulary.branches.get(value, value)
        return say(language, f"{josa(named, '은/는')} 조회 범위 밖입니다 ({own}만).",
                   f"{named} is outside what you may see ({own} only).")  # fmt: skip
    if value == OTHER_PLANNERS:
        return say(
            language,
            f"다른 설계사의 고객은 조회 범위 밖입니다 ({own}만).",
            f"Other planners' customers are outside what you may see ({own} only).",
        )
    name = vocabulary.planners.get(value, "")
    who = f"{name} 설계사({value})" if name else f"{value} 설계사"
    who_en = f"planner {name} ({value})" if name else f"planner {value}"
    return say(language, f"{who}의 고객은 조회 범위 밖입니다 ({own}만).",
               f"The customers of {who_en} are outside what you may see ({own} only).")  # fmt: skip


def _coverage_note(plan: dict, conventions, language: str, scope: str) -> str:
    """Which statuses a total or ranking over contracts or payments covers."""
    if "in_force_default" in conventions:
        return note_text("in_force_default", language, scope)
    entity = plan.get("entity")
    ranked = any(o.get("field") in MONEY_FIELDS for o in plan.get("order_by") or ())
    if entity not in _STATUSES or not (plan.get("aggregates") or ranked):
        return ""
    covered = list(_STATUSES[entity])
    for item in plan.get("filters") or ():
        if item["field"] != "status":
            continue
        values = item["value"] if isinstance(item["value"], list) else [item["value"]]
        if item["op"] in ("eq", "in"):
            covered = [s for s in covered if s in values]
        elif item["op"] in ("ne", "not_in"):
            covered = [s for s in covered if s not in values]
    shown = ", ".join(gloss(s, language) for s in covered)
    what = say(language, "계약" if entity == CONTRACTS else "납입",
               "contracts" if entity == CONTRACTS else "payments")  # fmt: skip
    if len(covered) == len(_STATUSES[entity]):
        return say(language, f"모든 {what} 상태({shown})를 포함합니다.",
                   f"Covers {what} of every status: {shown}.")  # fmt: skip
    if in_force_by_default(plan) and covered == [IN_FORCE_STATUS]:
        return say(language, f"유지 계약만 포함합니다 ({shown}).",
                   f"Covers in-force contracts only: {shown}.")  # fmt: skip
    return say(language, f"{what} 상태 {shown}만 포함합니다.",
               f"Covers {what} with status {shown} only.")  # fmt: skip


def _sentence(answer: dict, plan: dict, head: str, scope: str, language: str) -> str:
    """One sentence that answers: the figure for a single total, else how many rows."""
    as_of = answer.get("as_of", "")
    context = say(language, f"({scope}, {as_of} 현재)", f"({scope}, as of {as_of})")
    figures = _figures(answer, plan, language)
    if len(figures) == 1:  # the head names the total with every condition: "VIP 고객 수는 12명"
        value = figures[0][1]
        return say(language, f"{josa(head, '은/는')} {value}입니다 {context}.",
                   f"{head}: {value} {context}.")  # fmt: skip
    if figures:  # the head ends with the totals' labels: each is said once, with its figure
        labels = ", ".join(label for label, _ in figures)
        prefix = head[: -len(labels)] if head.endswith(labels) else f"{head}: "
        korean = ", ".join(f"{josa(label, '은/는')} {value}" for label, value in figures)
        english = "; ".join(value for _, value in figures)
        return say(language, f"{prefix}{korean}입니다 {context}.", f"{head}: {english} {context}.")
    count, unit = answer.get("row_count", 0), _unit(plan, language)
    if count and family_of(answer) == "top_n":  # the rows are the ranking asked for
        return say(language, f"{head}입니다 {context}.", f"{head} {context}.")
    if count == 0:
        return say(language, f"{head}: 조회 범위 안에 해당하는 행이 없습니다 {context}.",
                   f"{head}: none {context}.")  # fmt: skip
    if answer.get("truncated"):
        shown = f"{count}{unit}"
        first = f"{josa(shown, '이/가')} 넘어 처음 {josa(shown, '을/를')} 보여 줍니다"
        return say(
            language,
            f"{head}: {first} {context}.",
            f"{head}: more than {count} {unit}; the first {count} are shown {context}.",
        )
    return say(
        language, f"{head}: {count}{unit}입니다 {context}.", f"{head}: {count} {unit} {context}."
    )


def family_of(answer: dict) -> str:
    return (answer.get("interpretation") or {}).get("family", "")


# What one row of a grouped answer is, by its first grouping field: (Korean counter, English).
GROUP_UNITS = {
    "customer_id": ("명", "customers"), "planner_id": ("명", "planners"),
    "branch_id": ("곳", "branches"), "region": ("개 지역", "regions"),
    "product_code": ("개 상품", "products"), "category": ("개 분류", "categories"),
    "grade": ("개 등급", "grades"), "status": ("개 상태", "statuses"),
    "gender": ("개 성별", "genders"), "age_group": ("개 연령대", "age groups"),
    "due_month": ("개월", "months"), "contract_id": ("건", "contracts"),
}  # fmt: skip


def _unit(plan: dict, language: str) -> str:
    group_by = plan.get("group_by") or []
    if group_by:
        ko, en = GROUP_UNITS.get(group_by[0], ("개 항목", "rows"))
        return say(language, ko, en)
    entity = plan.get("entity")
    if language == "en":
        return {CUSTOMERS: "customers", CONTRACTS: "contracts", PAYMENTS: "payments"}.get(
            entity or "", "rows"
        )
    return "명" if entity == CUSTOMERS else "건"


def _figures(answer: dict, plan: dict, language: str) -> list[tuple[str, str]]:
    """(label, value) for each total of a one-row answer that is not grouped ("고객 수", "60명");
    [] for any other answer."""
    aggregates = plan.get("aggregates") or []
    if not aggregates or plan.get("group_by") or answer.get("row_count") != 1:
        return []
    row = answer["rows"][0]
    entity = plan["entity"]
    unpaid = any(f["field"] == "status" and f["value"] == "미납" for f in plan.get("filters") or ())
    return [
        (
            aggregate_text(entity, agg, unpaid, language),
            _figure(row.get(agg["as"]), agg, entity, language),
        )
        for agg in aggregates
    ]


def _figure(value: object, agg: dict, entity: str, language: str) -> str:
    if value is None:
        return say(language, "없음", "none")
    if agg["fn"] == "count":
        counter = say(language, "명" if entity == CUSTOMERS else "건", "")
        return f"{value:,}{counter}" if isinstance(value, int) else str(value)
    number = round(value) if isinstance(value, float) else value
    if agg.get("field") in MONEY_FIELDS and isinstance(number, int):
        return say(language, f"{number:,}원", f"KRW {number:,}")
    if agg.get("field") == "age" and isinstance(value, int | float):
        return say(language, f"{value:g}세", f"{value:g} years")
    return f"{number:,}" if isinstance(number, int) else str(number)


# -- the text content ----------------------------------------------------------------------------


def answer_text(answer: dict) -> str:
    """The tool's text content: the sentence, a markdown table of at most TABLE_ROWS rows, the
    masked columns named and the notes."""
    interpretation = answer.get("interpretation") or {}
    language = interpretation.get("language", "ko")
    plan = interpretation.get("plan") or {}
    parts = [interpretation.get("summary", "")]
    if not _figures(answer, plan, language) and answer.get("rows"):
        parts.append(_table(answer, plan, language))
    masked = _masked_labels(answer)
    if masked:
        parts.append(say(language, f"가려진 열(이 사용자 권한): {', '.join(masked)}.",
                         f"Masked for this user: {', '.join(masked)}."))  # fmt: skip
    notes = interpretation.get("notes") or []
    if notes:
        parts.append("\n".join(f"- {note}" for note in notes))
    return "\n\n".join(p for p in parts if p)


def _masked_labels(answer: dict) -> list[str]:
    labels = {c["name"]: c["label"] for c in answer.get("columns") or []}
    return [labels.get(name, name) for name in answer.get("masked_columns") or []]


def _table(answer: dict, plan: dict, language: str) -> str:
    money = MONEY_FIELDS | {
        a["as"] for a in plan.get("aggregates") or () if a.get("field") in MONEY_FIELDS
    }
    columns = answer.get("columns") or []
    rows = answer.get("rows") or []
    lines = [
        "| " + " | ".join(_cell(c["label"]) for c in columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    for row in rows[:TABLE_ROWS]:
        cells = [
            _value(row.get(c["name"]), c["name"] in money, c["name"], language) for c in columns
        ]
        lines.append("| " + " | ".join(cells) + " |")
    hidden = len(rows) - TABLE_ROWS
    beyond = answer.get("truncated") and family_of(answer) != "top_n"  # a ranking is complete
    if hidden > 0 or beyond:
        more = f"{hidden}" if hidden > 0 else ""
        lines.append("")
        lines.append(
            say(
                language,
                f"({more + '건 ' if more else ''}더 있음"
                f"{', 한도 밖에도 더 있음' if beyond else ''})",
                f"({more + ' ' if more else ''}more not shown"
                f"{'; more beyond the limit' if beyond else ''})",
            )
        )
    return "\n".join(lines)


def _value(value: object, money: bool, column: str, language: str) -> str:
    if value is None:
        return "—"
    if money and isinstance(value, int | float):
        return f"{round(value):,}"
    if column in GLOSSED_COLUMNS:
        return _cell(gloss(value, language))
    return _cell(str(value))


def _cell(text: str) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= _CELL_MAX else text[: _CELL_MAX - 1] + "…"
