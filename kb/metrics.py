"""What Select AI counts for /metrics: answers by question family, and refusals by reason.

A family is the shape of the plan that answered, never its values: the entity and whether it
listed rows, ranked them (sorted by anything but their id), or aggregated (with or without
grouping); "help" when no plan could be made. At most a dozen label values, and nothing of the
question's text."""

from prometheus_client import Counter

from kb.catalogue import ENTITIES

ANSWERS = Counter(
    "hyperbook_select_ai_answers",
    "Select AI answers by question family (entity and plan shape).",
    ["family"],
)
REFUSALS = Counter(
    "hyperbook_select_ai_refusals",
    "Select AI questions refused, by reason.",
    ["reason"],
)
REFUSAL_REASONS = frozenset(
    {
        "masked_condition",
        "unread_words",
        "out_of_data",
        "proof_disagrees",
        "not_understood",
        "policy_refused",
    }
    | {"invalid_plan"}
    | {"engine_error"}
)


def answer_family(answer: dict) -> str:
    plan = (answer.get("interpretation") or {}).get("plan")
    if not isinstance(plan, dict) or not plan.get("entity"):
        return "help"
    if plan["entity"] not in ENTITIES:
        return "other"
    if plan.get("group_by"):
        shape = "grouped"
    elif plan.get("aggregates"):
        shape = "aggregate"
    elif any(
        order.get("field") != ENTITIES[plan["entity"]].key for order in plan.get("order_by") or []
    ):
        shape = "ranked"  # sorted by something other than its id (lists are, for a stable order)
    else:
        shape = "list"
    return f"{plan['entity']}:{shape}"


def answer_counted(answer: dict) -> None:
    ANSWERS.labels(answer_family(answer)).inc()


def refusal_counted(reason: str) -> None:
    REFUSALS.labels(reason if reason in REFUSAL_REASONS else "other").inc()
