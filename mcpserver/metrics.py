"""What /mcp counts for /metrics: requests by method, outcome and reason, their latency per
method, and the rate limits' refusals. Labels come from fixed lists only: whatever a client sends
as a method or a header never becomes a label (cardinality, and nothing of a request leaks)."""

from prometheus_client import Counter, Histogram

from audit.models import AuditEvent

METHODS = frozenset({"initialize", "ping", "tools/list", "tools/call", "notifications/initialized"})
_OUTCOMES = frozenset(AuditEvent.Outcome.values)
_REASONS = frozenset(getattr(AuditEvent, "Reason", ()) and AuditEvent.Reason.values)

REQUESTS = Counter(
    "hyperbook_mcp_requests",
    "Requests to /mcp by JSON-RPC method, audit outcome and reason.",
    ["method", "outcome", "reason"],
)
LATENCY = Histogram(
    "hyperbook_mcp_request_duration_seconds",
    "Time from a /mcp request's arrival to its recorded answer, per JSON-RPC method.",
    ["method"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
RATE_LIMITED = Counter(
    "hyperbook_mcp_rate_limit_refusals",
    "Requests refused with 429: per delegation, or per address after failed authentications.",
    ["limit"],
)


def request_counted(*, method: str, outcome: str, reason: str, seconds: float) -> None:
    method = method if method in METHODS else ("" if not method else "other")
    outcome = outcome if outcome in _OUTCOMES else "other"
    reason = reason if reason in _REASONS or not reason else "other"
    REQUESTS.labels(method or "-", outcome, reason or "-").inc()
    LATENCY.labels(method or "-").observe(seconds)
    if outcome == AuditEvent.Outcome.RATE_LIMITED:
        RATE_LIMITED.labels("auth_failure" if reason == "auth_rate_limited" else "delegation").inc()
