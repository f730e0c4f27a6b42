"""Grouped and aggregated answers as a chart beside their table: bars for categories, a line for
months. The hint is worked out once from the answer's plan and kept with what the console shows;
the chart is drawn from the rows exactly as shown (masked values stay masked)."""

from __future__ import annotations

from django.utils.safestring import SafeString

from core.charts import MAX_MARKS, bar_chart, line_chart
from kb.catalogue import ENTITIES, Kind

_TIME_KINDS = (Kind.MONTH, Kind.DATE)


def chart_hint(answer: dict) -> dict | None:
    """{"kind": "bar"|"line", "labels": [column, …], "value": column, "title": …} when the
    answer groups rows and aggregates them; None for lists and single figures."""
    plan = (answer.get("interpretation") or {}).get("plan")
    if not isinstance(plan, dict):
        return None
    group_by, aggregates = plan.get("group_by") or [], plan.get("aggregates") or []
    entity = ENTITIES.get(plan.get("entity") or "")
    if not group_by or not aggregates or entity is None:
        return None
    columns = {
        column.get("name"): column.get("label", "") for column in answer.get("columns") or []
    }
    value = aggregates[0].get("as")
    if value not in columns or not all(name in columns for name in group_by):
        return None
    field = entity.fields.get(group_by[0])
    timed = len(group_by) == 1 and field is not None and field.kind in _TIME_KINDS
    return {
        "kind": "line" if timed else "bar",
        "labels": list(group_by),
        "value": value,
        "title": f"{columns[value]} · {' · '.join(columns[name] for name in group_by)}",
        "unit": columns[value],
    }


def _named_labels(columns: list[str]) -> list[str]:
    """Bars are labelled by names, not codes: a code or id column is left out of the label when
    the group also has a name ("AUTO-02 · KB운전자보험" reads "KB운전자보험")."""
    named = [name for name in columns if not name.endswith(("_code", "_id"))]
    return named or columns


def answer_chart(rendered: dict) -> SafeString | None:
    """The chart of a console turn's answer, or None when it has no hint or nothing to draw."""
    hint = rendered.get("chart")
    if not isinstance(hint, dict):
        return None
    names = [column.get("name") for column in rendered.get("columns") or []]
    try:
        label_at = [names.index(name) for name in _named_labels(hint["labels"])]
        value_at = names.index(hint["value"])
    except (KeyError, ValueError):
        return None
    labels, values = [], []
    for row in (rendered.get("rows") or [])[:MAX_MARKS]:
        number = row[value_at]
        if not isinstance(number, int | float) or isinstance(number, bool):
            continue  # a withheld or masked aggregate is not drawn as a number
        labels.append(" · ".join("" if row[i] is None else str(row[i]) for i in label_at))
        values.append(number)
    if not labels:
        return None
    if hint.get("kind") == "line":
        order = sorted(range(len(labels)), key=labels.__getitem__)
        return line_chart(
            [labels[i] for i in order],
            [values[i] for i in order],
            title=hint.get("title", ""),
            unit=hint.get("unit", ""),
        )
    return bar_chart(labels, values, title=hint.get("title", ""), unit=hint.get("unit", ""))
