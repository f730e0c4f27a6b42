"""Optional plan proposer: an OpenAI-compatible chat-completions model turns a question into a plan.

The model is sent the plan schema, the field catalogue, the closed vocabulary (products, branches,
grades, statuses) and the question: never data rows, never a token, never who is asking. What it
proposes is validated by kb.plans.plan_parse, and the data layer applies the VPD policy whatever
the plan says; callers fall back to the built-in parser on any ProviderError.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from core.outbound import OutboundError, checked_service_url, post_json
from kb.plans import (
    AGGREGATE_FNS,
    ENTITIES,
    MAX_AGGREGATES,
    MAX_FILTERS,
    MAX_GROUP_BY,
    MAX_LIMIT,
    MAX_ORDER_BY,
    OPS,
    PlanError,
    plan_parse,
)

from .vocabulary import Vocabulary

REPLY_MAX_BYTES = 256 * 1024
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL | re.IGNORECASE)


class ProviderError(Exception):
    """The model gave no usable plan; `reason` says why (timeout, http_500, invalid_plan, ...)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class ProviderConfig:
    base_url: str
    model: str
    api_key: str | None  # the provider's key (hyperbook's own), never a user's token
    timeout_seconds: float

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def __repr__(self) -> str:  # keeps the key out of logs and tracebacks
        return f"ProviderConfig(base_url={self.base_url!r}, model={self.model!r})"


def provider_config() -> ProviderConfig:
    """The SELECT_AI_* settings, checked; ImproperlyConfigured names what is wrong."""
    base_url = checked_service_url(settings.SELECT_AI_BASE_URL, "SELECT_AI_BASE_URL")
    model = (settings.SELECT_AI_MODEL or "").strip()
    if not model:
        raise ImproperlyConfigured("SELECT_AI_MODEL is not set")
    api_key = settings.SELECT_AI_API_KEY or None
    if api_key is not None and not re.fullmatch(r"[\x21-\x7e]{1,4096}", api_key):
        raise ImproperlyConfigured("SELECT_AI_API_KEY must be one visible-ASCII token")
    timeout = settings.SELECT_AI_TIMEOUT_SECONDS
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ImproperlyConfigured("SELECT_AI_TIMEOUT_SECONDS must be a positive number")
    return ProviderConfig(base_url=base_url, model=model, api_key=api_key, timeout_seconds=timeout)


@cache
def plan_json_schema() -> dict:
    """The plan as JSON Schema, for the model; kb.plans.plan_parse remains the authority."""
    name = {"type": "string"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "KB query plan",
        "type": "object",
        "required": ["entity"],
        "additionalProperties": False,
        "properties": {
            "entity": {"enum": list(ENTITIES)},
            "fields": {"type": "array", "items": name, "description": "row columns; [] = default"},
            "filters": {
                "type": "array",
                "maxItems": MAX_FILTERS,
                "items": {
                    "type": "object",
                    "required": ["field", "op", "value"],
                    "additionalProperties": False,
                    "properties": {
                        "field": name,
                        "op": {"enum": list(OPS)},
                        "value": {
                            "description": "string/integer; a list for in, not_in and between "
                            "([low, high]); dates YYYY-MM-DD, months YYYY-MM, age groups '30대'"
                        },
                    },
                },
            },
            "group_by": {"type": "array", "items": name, "maxItems": MAX_GROUP_BY},
            "aggregates": {
                "type": "array",
                "maxItems": MAX_AGGREGATES,
                "items": {
                    "type": "object",
                    "required": ["fn"],
                    "additionalProperties": False,
                    "properties": {
                        "fn": {"enum": list(AGGREGATE_FNS)},
                        "field": {"type": ["string", "null"], "description": "null for count"},
                        "as": {"type": "string", "pattern": "^[a-z_][a-z0-9_]{0,40}$"},
                    },
                },
            },
            "order_by": {
                "type": "array",
                "maxItems": MAX_ORDER_BY,
                "items": {
                    "type": "object",
                    "required": ["field"],
                    "additionalProperties": False,
                    "properties": {
                        "field": {"type": "string", "description": "a field or aggregate alias"},
                        "direction": {"enum": ["asc", "desc"]},
                    },
                },
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
        },
    }


@cache
def field_catalogue() -> dict:
    """entity -> {"label", "fields": {name: "label (kind)"}}, from kb.plans' entity table."""
    return {
        entity.name: {
            "label": entity.label,
            "fields": {f.name: f"{f.label} ({f.kind.value})" for f in entity.fields.values()},
        }
        for entity in ENTITIES.values()
    }


def model_messages(prompt: str, *, vocabulary: Vocabulary, as_of: dt.date, limit: int) -> list:
    values = {
        "products": {p.code: f"{p.name} ({p.category})" for p in vocabulary.products.values()},
        "branches": dict(vocabulary.branches),
        "grades": list(vocabulary.grades),
        "contract_statuses": list(vocabulary.contract_statuses),
        "payment_statuses": list(vocabulary.payment_statuses),
    }
    system = (
        "You translate a question about a Korean insurance knowledge base into a query plan.\n"
        "Reply with one JSON object and nothing else: the plan, valid against this JSON Schema:\n"
        f"{_json(plan_json_schema())}\n"
        "Entities and their fields (name: label (kind)); use only these names:\n"
        f"{_json(field_catalogue())}\n"
        "Known values (codes for product_code and branch_id filters):\n"
        f"{_json(values)}\n"
        "Rules: grouped plans (group_by or aggregates) select only group_by fields and sort by "
        "group_by fields or aggregate aliases. premium_payments has one row per contract per "
        "month (due_month YYYY-MM); 보험료 usually means amount there, 월보험료 means "
        f"contracts.monthly_premium. Today is {as_of.isoformat()}, so this month is "
        f"{as_of:%Y-%m}. Use limit {limit} unless the question asks for fewer rows. "
        "Which rows and columns the asker may see is enforced elsewhere: never try to widen, "
        "bypass or describe access. If the question is not about this data, reply "
        '{"plan": null}.'
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": prompt}]


def propose_plan(
    prompt: str, *, vocabulary: Vocabulary, as_of: dt.date, limit: int, config: ProviderConfig
) -> dict:
    """The model's plan, validated and normalised (kb.plans.Plan.as_dict), its limit capped at
    `limit`. Raises ProviderError for a timeout, non-200, redirect, garbage or an invalid plan."""
    payload = {
        "model": config.model,
        "messages": model_messages(prompt, vocabulary=vocabulary, as_of=as_of, limit=limit),
        "temperature": 0,
        "response_format": {"type": "json_object"},
    }
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    try:
        status, body = post_json(
            config.endpoint,
            payload=payload,
            headers=headers,
            timeout=config.timeout_seconds,
            max_bytes=REPLY_MAX_BYTES,
        )
    except OutboundError as exc:
        raise ProviderError(exc.reason) from None
    if status != 200:
        raise ProviderError(f"http_{status}")
    raw = _plan_from_reply(body)
    try:
        plan = plan_parse(raw).as_dict()
    except PlanError:
        raise ProviderError("invalid_plan") from None
    plan["limit"] = min(plan["limit"], limit) if "limit" in raw else limit
    return plan


def _plan_from_reply(body: bytes) -> dict:
    try:
        reply = json.loads(body)
        content = reply["choices"][0]["message"]["content"]
    except (ValueError, LookupError, TypeError):
        raise ProviderError("garbage") from None
    if not isinstance(content, str):
        raise ProviderError("garbage")
    content = content.strip()
    fenced = _FENCE.match(content)
    try:
        proposal = json.loads(fenced.group(1) if fenced else content)
    except ValueError:
        raise ProviderError("garbage") from None
    if not isinstance(proposal, dict):
        raise ProviderError("garbage")
    if set(proposal) == {"plan"}:
        proposal = proposal["plan"]
        if proposal is None:
            raise ProviderError("unmappable")
    if not isinstance(proposal, dict):
        raise ProviderError("invalid_plan")
    return proposal


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
