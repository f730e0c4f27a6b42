"""What /mcp counts for /metrics: requests by action, outcome and reason, their latency per
action, and the rate limits' refusals. Every label is a member of a fixed choice list
(AuditEvent.Action, Outcome, Reason): whatever a client sends never becomes a label, which keeps
their number bounded and nothing of a request in them."""

from prometheus_client import Counter, Histogram

from audit.models import AuditEvent
from mcpserver.records import RequestRecord

Reason = AuditEvent.Reason

REQUESTS = Counter(
    "hyperbook_mcp_requests",
    "Requests to /mcp by action (the JSON-RPC method served), audit outcome and reason.",
    ["action", "outcome", "reason"],
)
LATENCY = Histogram(
    "hyperbook_mcp_request_duration_seconds",
    "Time from a /mcp request's arrival to its recorded answer, per action.",
    ["action"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RATE_LIMITED = Counter(
    "hyperbook_mcp_rate_limit_refusals",
    "Requests refused with 429: per delegation, or per address after failed authentications.",
    ["limit"],
)


def request_counted(record: RequestRecord) -> None:
    action, outcome = str(record.action), str(record.outcome)
    REQUESTS.labels(action, outcome, str(record.reason or "-")).inc()
    LATENCY.labels(action).observe(record.latency_ms / 1000)
    if record.reason in (Reason.RATE_LIMITED, Reason.AUTH_RATE_LIMITED):
        limit = "delegation" if record.reason == Reason.RATE_LIMITED else "auth_failure"
        RATE_LIMITED.labels(limit).inc()
