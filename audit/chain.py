"""The hash chain: each event's hash covers its canonical JSON, including the previous hash."""

import datetime as dt
import hashlib
import json
from typing import Any

try:
    import orjson
except ImportError:  # the standalone verifier (python -S -m audit.verify) has only the stdlib
    orjson = None  # type: ignore[assignment]  # canonical_json falls back to json then

GENESIS_HASH = "0" * 64

# The fields an event's hash covers, in the order they are shown; `hash` itself is not one of them.
HASHED_FIELDS = (
    "id",
    "source",
    "sequence",
    "occurred_at",
    "action",
    "outcome",
    "http_status",
    "request_id",
    "rpc_method",
    "tool",
    "stakeholder_id",
    "stakeholder_role",
    "delegation_id",
    "token_prefix",
    "token_fingerprint",
    "client_address",
    "origin",
    "user_agent",
    "latency_ms",
    "row_count",
    "masked_columns",
    "prompt_length",
    "prompt_hash",
    "actor",
    "target",
    "changes",
    "detail",
    "prev_hash",
)
CONTENT_FIELDS = tuple(
    f for f in HASHED_FIELDS if f not in ("id", "source", "sequence", "occurred_at", "prev_hash")
) + ("client_request_id",)


def occurred_at_text(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Hashed only when set, so that events written before it existed keep their hashes.
OPTIONAL_HASHED_FIELDS = ("client_request_id",)


def canonical_json(values: dict) -> str:
    """`values` as a database row holds them (UUID, datetime) or as an export carries them (the id
    and `occurred_at_text` as strings)."""
    data: dict[str, Any] = {name: values.get(name) for name in HASHED_FIELDS}
    for name in OPTIONAL_HASHED_FIELDS:
        if values.get(name):
            data[name] = values[name]
    data["id"] = str(data["id"])
    if not isinstance(data["occurred_at"], str):
        data["occurred_at"] = occurred_at_text(data["occurred_at"])
    if data["latency_ms"] is not None:
        # Floats round-trip through databases with different precision; hash a fixed form.
        data["latency_ms"] = f"{float(data['latency_ms']):.3f}"
    if not data["changes"] and orjson is not None:
        # A request event holds only text, integers, null and lists of text, which orjson writes
        # exactly as the json call below does (tests/audit/test_chain.py checks), five times faster.
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode()
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def event_hash(values: dict) -> str:
    return hashlib.sha256(canonical_json(values).encode()).hexdigest()
