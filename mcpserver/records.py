"""What one /mcp request did, as the gate and the tool found it: the source of its log line and
its audit event."""

from dataclasses import dataclass, field

from audit.models import AuditEvent
from mcpserver.principals import Principal

Action = AuditEvent.Action

# The JSON-RPC methods this server serves, each recorded as its own action. Any other method a
# client sends is recorded as MCP_REQUEST (its text stays in rpc_method): a client cannot add
# actions to the audit log.
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
