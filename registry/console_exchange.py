"""One exchange with an MCP server as a person (the console, kb_ask) and its audit event."""

import time
from dataclasses import dataclass

from audit.models import AuditEvent
from audit.services import audit_record, prompt_fingerprint
from core.tokens import token_fingerprint
from registry.mcp.calls import CallResult, Discovery, kb_tool_call, kb_tools_discover
from registry.mcp.contract import (
    DEFAULT_LIMIT,
)
from registry.mcp.errors import (
    Forbidden,
    MalformedBearer,
    MalformedResponse,
    McpClientError,
    MissingToken,
    OriginRefused,
    RateLimited,
    Unauthorized,
    to_public_mcp_error,
)
from registry.mcp.transport import TranscriptRecorder
from registry.models import ConsoleTurn, McpServer
from registry.tokens import (
    MalformedToken,
    display_prefix,
    normalize_token,
)

# --- one exchange as a person (the console, kb_ask) and its audit event ------------------------


class ExchangeRefused(ValueError):
    """Nothing was sent: something must be fixed first; the message is safe to show.

    `code` names the refusal for the audit trail, `outcome` is its audit event's outcome."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "refused",
        outcome: AuditEvent.Outcome = AuditEvent.Outcome.ERROR,
    ):
        super().__init__(message)
        self.code = code
        self.outcome = outcome


@dataclass(frozen=True)
class Exchange:
    """One discovery or call as it ended: a result or an error, and how long it took."""

    kind: str
    result: Discovery | CallResult | None = None
    error: BaseException | None = None
    latency_ms: float = 0.0
    exchange_id: str = ""


def mcp_exchange_run(
    *,
    kind: str,
    server: McpServer,
    token: str,
    prompt: str = "",
    limit: int = DEFAULT_LIMIT,
    trust_first_use: bool,
    actor=None,
    exchange_id: str = "",
    recorder: TranscriptRecorder | None = None,
) -> Exchange:
    """Discover (`kind` "discover") or call ("call") a registered server with this token.

    Never raises: whatever goes wrong, from a refused URL to a server answering garbage, comes
    back as the exchange's error for `to_public_mcp_error` to put in Korean. `exchange_id` goes
    on every HTTP request (X-Request-ID) and on the exchange's own audit event, so that all of
    them can be listed together; `recorder` receives each JSON-RPC message sent and received."""
    started = time.perf_counter()
    result: Discovery | CallResult
    try:
        if kind == ConsoleTurn.Kind.DISCOVER:
            result = kb_tools_discover(
                server=server,
                token=token,
                actor=actor,
                trust_first_use=trust_first_use,
                exchange_id=exchange_id or None,
                recorder=recorder,
            )
        else:
            result = kb_tool_call(
                server=server,
                token=token,
                prompt=prompt,
                limit=limit,
                actor=actor,
                trust_first_use=trust_first_use,
                exchange_id=exchange_id or None,
                recorder=recorder,
            )
    except Exception as exc:  # every failure becomes a safe public message and an audit event
        return Exchange(kind, error=exc, latency_ms=_since(started), exchange_id=exchange_id)
    return Exchange(kind, result=result, latency_ms=_since(started), exchange_id=exchange_id)


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


_EXCHANGE_ACTIONS: dict[str, AuditEvent.Action] = {
    ConsoleTurn.Kind.DISCOVER: AuditEvent.Action.CONSOLE_DISCOVER,
    ConsoleTurn.Kind.CALL: AuditEvent.Action.CONSOLE_CALL,
}

# A failure's audit outcome, by its class (any other failure is an error). Kept here rather than
# on the error classes: those load without Django, and AuditEvent is a model.
_FAILURE_OUTCOMES: tuple[tuple[type[BaseException], AuditEvent.Outcome], ...] = (
    (Unauthorized, AuditEvent.Outcome.UNAUTHENTICATED),
    (MissingToken, AuditEvent.Outcome.UNAUTHENTICATED),
    (MalformedBearer, AuditEvent.Outcome.UNAUTHENTICATED),
    (MalformedToken, AuditEvent.Outcome.UNAUTHENTICATED),
    (Forbidden, AuditEvent.Outcome.FORBIDDEN),
    (RateLimited, AuditEvent.Outcome.RATE_LIMITED),
    (OriginRefused, AuditEvent.Outcome.REFUSED_ORIGIN),
    (MalformedResponse, AuditEvent.Outcome.MALFORMED),
)


def failure_outcome(error: BaseException) -> AuditEvent.Outcome:
    for kind, outcome in _FAILURE_OUTCOMES:
        if isinstance(error, kind):
            return outcome
    return AuditEvent.Outcome.ERROR


def mcp_exchange_audit(
    *,
    exchange: Exchange | None,
    server_id: str,
    tool: str,
    actor: str,
    token: str | None = None,
    stakeholder_id: str = "",
    stakeholder_role: str = "",
    prompt: str | None = None,
    refusal: ExchangeRefused | None = None,
    kind: str = "",
) -> AuditEvent:
    """The audit event of one exchange ("console.discover" / "console.call"), or of a refusal
    before anything was sent (`kind` then says which it would have been): outcome, HTTP status,
    request id, exchange id, server, tool, row count, latency, the token's display prefix and keyed
    fingerprint (never the token), a keyed hash of the prompt (never its text)."""
    kind = exchange.kind if exchange is not None else kind
    values: dict = {
        "action": _EXCHANGE_ACTIONS[kind],
        "target": server_id,
        "tool": tool or "",
        "stakeholder_id": stakeholder_id,
        "stakeholder_role": stakeholder_role,
        "actor": actor,
        "latency_ms": exchange.latency_ms if exchange is not None else None,
        # The id every request of the exchange carried: /mcp keeps it as their client request id.
        "client_request_id": (exchange.exchange_id or None) if exchange is not None else None,
    }
    if token:
        try:
            normalized = normalize_token(token)
        except MalformedToken:
            normalized = None
        if normalized is not None:
            values["token_prefix"] = display_prefix(normalized)
            values["token_fingerprint"] = token_fingerprint(normalized)
    if isinstance(prompt, str) and prompt:
        values["prompt_length"] = len(prompt)
        values["prompt_hash"] = prompt_fingerprint(prompt)
    result = exchange.result if exchange is not None else None
    error = exchange.error if exchange is not None else None
    if refusal is not None:
        values["outcome"] = refusal.outcome
        values["detail"] = refusal.code
    elif error is not None:
        public = to_public_mcp_error(error)
        values["outcome"] = failure_outcome(error)
        values["http_status"] = public.http_status
        # An unexpected failure names its exception class (never its message) for diagnosis.
        values["detail"] = (
            public.code if public.code != "error" else f"error:{type(error).__name__}"
        )
        if isinstance(error, McpClientError):
            values["request_id"] = error.request_id
            values["rpc_method"] = error.rpc_method
    elif isinstance(result, CallResult):
        values["outcome"] = (
            AuditEvent.Outcome.TOOL_ERROR if result.is_error else AuditEvent.Outcome.ALLOWED
        )
        values["http_status"] = result.http_status
        values["request_id"] = result.request_id
        values["rpc_method"] = "tools/call"
        values["row_count"] = result.row_count
        values["tool"] = result.tool
    elif isinstance(result, Discovery):
        values["outcome"] = AuditEvent.Outcome.ALLOWED
        values["http_status"] = 200
        values["request_id"] = result.request_id
        values["rpc_method"] = "tools/list"
        values["tool"] = result.tool
        values["detail"] = f"pin:{result.pin_state}"
    else:
        values["outcome"] = AuditEvent.Outcome.ERROR
    return audit_record(**values)
