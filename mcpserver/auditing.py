"""What an /mcp request's audit event records: the gate's findings, never a token or prompt text."""

from audit.models import AuditEvent
from audit.writer import AuditWriter
from mcpserver.gate import RequestRecord

_OUTCOMES = {
    "allowed": AuditEvent.Outcome.ALLOWED,
    "preflight": AuditEvent.Outcome.ALLOWED,
    "unauthenticated": AuditEvent.Outcome.UNAUTHENTICATED,
    "forbidden": AuditEvent.Outcome.FORBIDDEN,
    "rate_limited": AuditEvent.Outcome.RATE_LIMITED,
    "refused_origin": AuditEvent.Outcome.REFUSED_ORIGIN,
    "refused_host": AuditEvent.Outcome.REFUSED_HOST,
    "too_large": AuditEvent.Outcome.TOO_LARGE,
    "refused_method": AuditEvent.Outcome.MALFORMED,
    "refused_content_type": AuditEvent.Outcome.MALFORMED,
    "refused_malformed": AuditEvent.Outcome.MALFORMED,
    "error": AuditEvent.Outcome.ERROR,
}
_TOOL_ERRORS = {"invalid_arguments", "engine_error", "invalid_plan"}


def event_values(record: RequestRecord) -> dict:
    outcome = _OUTCOMES.get(record.outcome, AuditEvent.Outcome.ERROR)
    if outcome == AuditEvent.Outcome.ALLOWED and record.status >= 400:
        outcome = AuditEvent.Outcome.MALFORMED  # refused by the SDK (e.g. protocol version)
    if outcome == AuditEvent.Outcome.ALLOWED and record.reason in _TOOL_ERRORS:
        outcome = AuditEvent.Outcome.TOOL_ERROR
    if outcome == AuditEvent.Outcome.ALLOWED and record.reason == "policy_refused":
        outcome = AuditEvent.Outcome.FORBIDDEN
    rpc = record.rpc_method.replace("/", "_") if record.rpc_method else ""
    action = "mcp.preflight" if record.outcome == "preflight" else f"mcp.{rpc or 'request'}"
    principal = record.principal
    return {
        "action": action[:64],
        "outcome": outcome,
        "http_status": record.status or None,
        "request_id": record.request_id,
        "rpc_method": record.rpc_method[:64],
        "tool": record.tool,
        "stakeholder_id": principal.stakeholder_id if principal else "",
        "stakeholder_role": principal.role if principal else "",
        "delegation_id": principal.delegation_id if principal else None,
        "token_prefix": principal.display_prefix if principal else "",
        "token_fingerprint": principal.fingerprint if principal else "",
        "client_address": record.client[:64],
        "origin": (record.origin or "")[:256],
        "user_agent": record.user_agent,
        "latency_ms": round(record.latency_ms, 3),
        "row_count": record.row_count,
        "masked_columns": record.masked_columns,
        "prompt_length": record.prompt_length,
        "prompt_hash": record.prompt_hash,
        "detail": record.reason[:128],
    }


class RequestAuditor:
    """The gate's audit hooks: every request announced at its start, recorded at its end."""

    def __init__(self, writer: AuditWriter | None = None):
        self.writer = writer or AuditWriter()

    def started(self) -> None:
        self.writer.expect()

    def abandoned(self) -> None:
        self.writer.forget()

    def close(self) -> None:
        self.writer.close()

    async def completed(self, record: RequestRecord) -> None:
        """Returns once the request's event is committed; raises if it could not be."""
        try:
            values = event_values(record)
        except Exception:
            self.writer.forget()  # no event will follow: do not keep a batch waiting for it
            raise
        await self.writer.record(values, expected=True)
