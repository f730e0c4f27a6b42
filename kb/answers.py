"""The one shape of a KB answer (the MCP tool's structuredContent) and its JSON Schema."""

from __future__ import annotations

import datetime as dt
from decimal import ROUND_HALF_UP, Decimal

from core import tracing
from kb.catalogue import MAX_LIMIT, MIN_LIMIT

ANSWER_JSON_SCHEMA: dict = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "KB VPD answer",
    "type": "object",
    "required": [
        "columns",
        "rows",
        "row_count",
        "truncated",
        "limit",
        "masked_columns",
        "as_of",
        "stakeholder",
        "interpretation",
    ],
    "additionalProperties": False,
    "properties": {
        "columns": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "label"],
                "additionalProperties": False,
                "properties": {"name": {"type": "string"}, "label": {"type": "string"}},
            },
        },
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": {"type": ["string", "integer", "number", "null"]},
            },
        },
        "row_count": {"type": "integer", "minimum": 0},
        "truncated": {"type": "boolean", "description": "more rows existed than the limit"},
        "limit": {"type": "integer", "minimum": MIN_LIMIT, "maximum": MAX_LIMIT},
        "masked_columns": {
            "type": "array",
            "items": {"type": "string"},
            "description": "columns masked, withheld or derived at reduced precision for this user",
        },
        "as_of": {"type": "string", "format": "date"},
        "stakeholder": {
            "type": "object",
            "required": ["id", "role", "branch_id"],
            "additionalProperties": False,
            "properties": {
                "id": {"type": "string"},
                "role": {"type": "string"},
                "branch_id": {"type": ["string", "null"]},
            },
        },
        "interpretation": {"type": "object"},
    },
}


def json_value(value: object) -> str | int | float | None:
    """A database value as JSON: dates as ISO text, decimals as int (whole) or 2-place float."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, float):
        value = Decimal(repr(value))
    if isinstance(value, Decimal):
        rounded = value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        return int(rounded) if rounded == rounded.to_integral_value() else float(rounded)
    return str(value)


@tracing.traced("kb.answer_build")
def answer_build(
    *,
    columns: list[tuple[str, str]],
    rows: list[dict],
    truncated: bool,
    limit: int,
    masked_columns: list[str],
    as_of: dt.date,
    stakeholder_id: str,
    role: str,
    branch_id: str | None,
    interpretation: dict,
) -> dict:
    return {
        "columns": [{"name": name, "label": label} for name, label in columns],
        "rows": rows,
        "row_count": len(rows),
        "truncated": truncated,
        "limit": limit,
        "masked_columns": masked_columns,
        "as_of": as_of.isoformat(),
        "stakeholder": {"id": stakeholder_id, "role": role, "branch_id": branch_id},
        "interpretation": interpretation,
    }
