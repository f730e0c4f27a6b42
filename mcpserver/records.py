"""What one /mcp request did, as the gate and the tool found it: the source of its log line and
its audit event."""

import re
from dataclasses import dataclass, field

from audit.models import AuditEvent
from audit.writer import Appended
from core.redaction import looks_like_secret, redact_secrets
from mcpserver.principals import Principal

Action = AuditEvent.Action

# The JSON-RPC methods this server serves, each recorded as its own action. Any other method a
# client sends is recorded as MCP_REQUEST with an empty rpc_method: a client cannot add
# actions to the audit log, nor keep text of its choosing in it: the method is not recorded.
ACTIONS = {
    "initialize": Action.MCP_INITIALIZE,
    "ping": Action.MCP_PING,
    "server/discover": Action.MCP_SERVER_DISCOVER,
    "tools/list": Action.MCP_TOOLS_LIST,
    "tools/call": Action.MCP_TOOLS_CALL,
    "notifications/initialized": Action.MCP_NOTIFICATIONS_INITIALIZED,
    "notifications/cancelled": Action.MCP_NOTIFICATIONS_CANCELLED,
    "notifications/progress": Action.MCP_NOTIFICATIONS_PROGRESS,
    "notifications/roots/list_changed": Action.MCP_NOTIFICATIONS_ROOTS_LIST_CHANGED,
}


@dataclass
class RequestRecord:
    """Never holds a token or a prompt's text. `outcome` and `reason` are set where the request is
    refused or fails; a request that neither sets is allowed, or an error if its status says so."""

    request_id: str
    started: float
    client_request_id: str = ""
    client: str = ""
    origin: str | None = None
    user_agent: str = ""
    http_method: str = ""
    status: int = 0
    action: AuditEvent.Action = Action.MCP_REQUEST
    outcome: AuditEvent.Outcome | None = None
    reason: AuditEvent.Reason | None = None
    rpc_method: str = ""
    tool: str = ""
    principal: Principal | None = None
    prompt_length: int | None = None
    prompt_hash: str = ""
    row_count: int | None = None
    masked_columns: list[str] = field(default_factory=list)
    latency_ms: float = 0.0
    self_url: str = ""  # this server's /mcp, as the caller reached it (or MCP_RESOURCE_URL)
    appended: Appended | None = None  # the event, once committed


CLIENT_REQUEST_ID_RE = re.compile(r"[A-Za-z0-9._:~-]{1,64}")  # what request ids are made of
MAX_CLIENT_TEXT = 256
_NOT_VISIBLE_ASCII = re.compile(r"[^\x20-\x7e]")


def secrets_sent(authorization: str | None) -> tuple[str, ...]:
    """The pieces of an Authorization header that may be a secret, valid or not: each is redacted
    wherever the same request repeats it."""
    pieces = (authorization or "").split()
    return tuple(piece for piece in pieces if len(piece) >= 8 and piece.lower() != "bearer")


def client_request_id(value: str, *, known: tuple[str, ...]) -> str:
    """The client's X-Request-ID if it looks like an id and not like a secret; else nothing."""
    if not CLIENT_REQUEST_ID_RE.fullmatch(value):
        return ""
    if looks_like_secret(value) or any(secret in value for secret in known):
        return ""
    return value


def client_text(value: str, *, known: tuple[str, ...], limit: int = MAX_CLIENT_TEXT) -> str:
    """Free text a client sent in a header (User-Agent, Origin), as it may be kept: visible ASCII,
    every secret shape and every secret this request sent redacted, at most `limit` long."""
    visible = _NOT_VISIBLE_ASCII.sub("?", value)
    return redact_secrets(visible, known=known)[:limit]
