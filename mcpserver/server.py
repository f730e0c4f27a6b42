"""The embedded MCP server: the official SDK's low-level server with one tool, behind the gate."""

import asyncio
import logging
from contextlib import asynccontextmanager

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext as _
from mcp import types
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.shared.exceptions import MCPError

from audit.models import AuditEvent
from core import tracing
from kb import metrics as kb_metrics
from kb.errors import KbError
from kb.ords import OrdsError
from kb.plans import PlanError
from kb.policy import ConditionRefused, PolicyRefused
from mcpserver import exchange, tool
from mcpserver.auditing import RequestAuditor
from mcpserver.gate import McpGate
from mcpserver.ratelimit import RateLimits
from mcpserver.threads import in_db_thread

logger = logging.getLogger("hyperbook.mcp")

INSTRUCTIONS = (
    "Ask questions about the KB insurance knowledge base with ords.query.kb_select_ai_vpd. "
    "Answers are limited to what the token's user may see."
)


def _answer(principal, question) -> dict:
    from kb.answering import answer

    return answer(principal.asker, question, delegation_id=principal.delegation_id)


_answer_in_db_thread = in_db_thread(_answer)

Outcome = AuditEvent.Outcome
Reason = AuditEvent.Reason

# How each refusal of the KB is recorded, most specific first; a reason of None records the
# refusal's own (a question refused by name: unread_words, …). A question the tool would not run
# is refused; an asker barred by the policy is forbidden; the rest are the tool's errors.
_KB_REFUSALS: tuple[tuple[type[KbError], AuditEvent.Outcome, AuditEvent.Reason | None], ...] = (
    (PolicyRefused, Outcome.FORBIDDEN, Reason.POLICY_REFUSED),
    (ConditionRefused, Outcome.REFUSED, None),
    (OrdsError, Outcome.TOOL_ERROR, Reason.ENGINE_ERROR),
    (PlanError, Outcome.TOOL_ERROR, Reason.INVALID_PLAN),
)


def _recorded_as(exc: KbError) -> tuple[AuditEvent.Outcome, AuditEvent.Reason]:
    for kind, outcome, reason in _KB_REFUSALS:
        if isinstance(exc, kind):
            if reason is None:
                try:
                    reason = Reason(exc.reason)
                except ValueError:  # a reason the audit does not name yet: still a refusal
                    reason = Reason.MASKED_CONDITION
            return outcome, reason
    return Outcome.TOOL_ERROR, Reason.ENGINE_ERROR


def _answered_with_error(
    record, error: Exception, outcome: AuditEvent.Outcome, reason: AuditEvent.Reason
) -> None:
    # The span gets the error's type and the audit's reason: a refusal's message quotes the
    # question's words, so it stays out of the trace.
    tracing.span_failed(error, reason)
    if reason != AuditEvent.Reason.INVALID_ARGUMENTS:  # the engine refused, not the schema
        kb_metrics.refusal_counted(reason)
    if record is not None:
        record.outcome, record.reason = outcome, reason


def _warm_up() -> None:
    """Load what the first question would otherwise wait seconds for (the Korean analyser)."""
    from django.core.exceptions import ImproperlyConfigured

    from kb.answering import warm_up

    try:
        warm_up()
    except ImproperlyConfigured:
        raise  # a broken engine configuration should stop the server from starting
    except Exception:
        logger.warning("KB engine warm-up failed; the first question will be slower", exc_info=True)


_warm_up_in_db_thread = in_db_thread(_warm_up)


def build_server() -> Server:
    from kb.answers import ANSWER_JSON_SCHEMA

    definition = tool.tool_definition(ANSWER_JSON_SCHEMA)

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[definition])

    async def call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        if params.name != tool.TOOL_NAME:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name[:128]}")
        state = ctx.request.scope.get("state", {}) if ctx.request is not None else {}
        principal, record = state.get("principal"), state.get("record")
        if principal is None or tool.TOOL_NAME not in principal.tools:
            # The gate refuses these with 403 first; this is the second line, never the only one.
            raise MCPError(types.INVALID_REQUEST, "Not permitted")
        with tracing.span("kb.tool", {"mcp.tool": tool.TOOL_NAME}):
            try:
                question = tool.checked_arguments(params.arguments)
            except tool.ArgumentError as exc:
                _answered_with_error(record, exc, Outcome.TOOL_ERROR, Reason.INVALID_ARGUMENTS)
                return tool.error_result(f"Invalid arguments: {exc}")
            try:
                answer = await _answer_in_db_thread(principal, question)
            except KbError as exc:
                # Refusals are written in the question's language; the fallback follows it too.
                _answered_with_error(record, exc, *_recorded_as(exc))
                with translation.override(question.language):
                    return tool.error_result(exc.message or _("이 사용자에게 조회 권한 없음"))
            except Exception as exc:
                request_id = record.request_id if record is not None else "-"
                logger.exception("tool failed request_id=%s", request_id)
                _answered_with_error(record, exc, Outcome.TOOL_ERROR, Reason.ENGINE_ERROR)
                with translation.override(question.language):
                    message = _("조회 중 오류가 발생했습니다 (request id %(request_id)s).")
                return tool.error_result(message % {"request_id": request_id})
        if record is not None:
            record.row_count = answer.get("row_count")
            record.masked_columns = list(answer.get("masked_columns", []))
        kb_metrics.answer_counted(answer)
        return tool.answer_result(answer)

    server = Server(
        "hyperbook-kb",
        version="1.0.0",
        title="hyperbook KB VPD MCP",
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        get_tool_input_schema=lambda name: (
            definition.input_schema if name == tool.TOOL_NAME else None
        ),
    )
    # The SDK's own spans are named after the client's method and tool text, and take their
    # parent from the client's params._meta; ours (core.tracing) cover the same ground.
    server.middleware = [m for m in server.middleware if not isinstance(m, OpenTelemetryMiddleware)]
    return server


class McpApplication:
    """ASGI app for /mcp: the gate, then one exchange on the SDK's kernel (or its transport)."""

    def __init__(self):
        self.auditor = auditor = RequestAuditor() if settings.AUDIT_MCP_REQUESTS else None
        self.server = build_server()
        self.session_manager = StreamableHTTPSessionManager(
            app=self.server,
            json_response=True,
            stateless=True,
            max_request_body_size=settings.MCP_MAX_BODY_BYTES,
        )
        self.sdk_transport = StreamableHTTPASGIApp(self.session_manager)
        self.gate = McpGate(
            self._serve,
            allowed_hosts=settings.MCP_ALLOWED_HOSTS,
            allowed_origins=settings.MCP_ALLOWED_ORIGINS,
            resource_url=settings.MCP_RESOURCE_URL,
            authorization_servers=settings.MCP_AUTHORIZATION_SERVERS,
            max_body_bytes=settings.MCP_MAX_BODY_BYTES,
            rate_limits=RateLimits.from_settings(),
            auditor=auditor,
        )

    @asynccontextmanager
    async def running(self):
        # Per worker, after any fork: the exporter's thread must belong to the serving process.
        tracing.tracing_configure()
        async with self.session_manager.run():
            await _warm_up_in_db_thread()
            summaries = (
                asyncio.create_task(self._write_refusal_summaries())
                if self.auditor is not None
                else None
            )
            try:
                yield
            finally:
                if summaries is not None:
                    summaries.cancel()
                if self.auditor is not None:
                    # The current window's refusal counts, then everything still pending.
                    await self.auditor.flush(final=True)
                    await self.auditor.close()
                tracing.tracing_shutdown()

    async def _write_refusal_summaries(self):
        """Each window's refusal summaries are written when it ends, flood or no flood."""
        pause = min(5.0, settings.AUDIT_REFUSAL_WINDOW_SECONDS / 4)
        while True:
            await asyncio.sleep(pause)
            try:
                await self.auditor.flush(final=False)
            except Exception:
                logger.exception("could not write the refusal summaries; trying again")

    async def __call__(self, scope, receive, send):
        await self.gate(scope, receive, send)

    async def _serve(self, scope, receive, send):
        """Behind the gate: one JSON exchange on the SDK's kernel, or the SDK's own transport."""
        message = scope["state"].get("message")
        if exchange.serves(scope, message):
            # The state the SDK's manager entered the server's lifespan with (set by run()).
            lifespan_state = self.session_manager._lifespan_state
            return await exchange.serve_exchange(
                self.server, lifespan_state, message, scope, receive, send
            )
        await self.sdk_transport(scope, receive, send)
