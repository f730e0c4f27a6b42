"""The admin console (and `manage.py kb_ask`) as a person: which token to use, and the console's
history of exchanges (registry.services runs and audits them).

The token lives only in the caller's memory. History and audit keep a safe projection: what was
asked and seen (already masked by the server's VPD policy, echoed secrets redacted), never the
token. Every failure, expected or not, ends as a Korean message and an audit event.
"""

import math
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.models import AuditEvent
from audit.services import audit_record
from core.redaction import redact_secrets
from core.tokens import token_fingerprint
from kb.catalogue import TOOL_DEFAULT_LIMIT
from registry.answer_chart import chart_hint
from registry.console_transcript import transcript_capped
from registry.mcp.errors import to_public_mcp_error
from registry.models import ConsoleTurn, McpServer
from registry.presets import PresetFileError, read_token_presets
from registry.services import (
    CallResult,
    Discovery,
    Exchange,
    ExchangeRefused,
    mcp_exchange_audit,
    mcp_exchange_run,
)
from registry.tokens import MalformedToken, display_prefix, normalize_token

USE_CONSOLE_PERMISSION = "registry.use_console"
APPROVE_PIN_PERMISSION = "registry.approve_toolpin"


class ConsoleError(ExchangeRefused):
    """Something the admin must fix before anything is sent; the message is safe to show.

    `code` names the failure for the audit trail."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "console_error",
        outcome: AuditEvent.Outcome = AuditEvent.Outcome.ERROR,
    ):
        super().__init__(message, code=code, outcome=outcome)


@dataclass(frozen=True)
class ConsoleToken:
    value: str
    stakeholder_id: str
    prefix: str
    fingerprint: str

    def __repr__(self) -> str:  # never show the value, even in a debug page or traceback
        return f"ConsoleToken(prefix={self.prefix!r}, stakeholder_id={self.stakeholder_id!r})"


def console_presets() -> tuple[list[str], str]:
    """The stakeholder ids that have a demo token preset (the tokens stay on the server), and
    why there are none when the preset file cannot be used."""
    try:
        return sorted(read_token_presets(settings.VPD_TOKEN_PRESETS_FILE)), ""
    except PresetFileError as exc:
        return [], _("토큰 프리셋 파일을 쓸 수 없습니다: %(why)s") % {"why": exc}


def console_token(*, stakeholder_id: str = "", one_time_bearer: str = "", presets_file=None):
    """The bearer to use: a typed one-time token, or the stakeholder's preset."""
    if one_time_bearer:
        try:
            value = normalize_token(one_time_bearer)
        except MalformedToken:
            raise ConsoleError(
                _("토큰 형식이 올바르지 않습니다."),
                code="malformed_token",
                outcome=AuditEvent.Outcome.UNAUTHENTICATED,
            ) from None
        return _token(value, stakeholder_id or "")
    if not stakeholder_id:
        raise ConsoleError(
            _("토큰이 없습니다: 관계자 프리셋을 고르거나 일회용 토큰을 입력하세요."),
            code="missing_token",
            outcome=AuditEvent.Outcome.UNAUTHENTICATED,
        )
    try:
        presets = read_token_presets(presets_file or settings.VPD_TOKEN_PRESETS_FILE)
    except PresetFileError as exc:
        raise ConsoleError(
            _("토큰 프리셋 파일을 쓸 수 없습니다: %(why)s") % {"why": exc}, code="preset_file"
        ) from None
    if stakeholder_id not in presets:
        raise ConsoleError(_("이 관계자의 토큰 프리셋이 없습니다."), code="unknown_stakeholder")
    try:
        return _token(normalize_token(presets[stakeholder_id]), stakeholder_id)
    except MalformedToken:
        raise ConsoleError(
            _("프리셋의 토큰 형식이 올바르지 않습니다."), code="preset_file"
        ) from None


def _token(value: str, stakeholder_id: str) -> ConsoleToken:
    return ConsoleToken(value, stakeholder_id, display_prefix(value), token_fingerprint(value))


def console_run(
    *,
    user,
    kind: str,
    server: McpServer,
    token: ConsoleToken,
    prompt: str = "",
    limit: int = TOOL_DEFAULT_LIMIT,
) -> ConsoleTurn:
    """One console exchange as `user`, kept as a turn of their history with its audit event.

    One new exchange id goes on every request and on the audit event; the JSON-RPC messages are
    kept on the turn as its transcript."""
    messages: list[dict] = []
    exchange = mcp_exchange_run(
        kind=kind,
        server=server,
        token=token.value,
        prompt=prompt,
        limit=limit,
        # Pinning a server seen for the first time is a pin decision: it takes that right.
        trust_first_use=user.has_perm(APPROVE_PIN_PERMISSION),
        actor=user,
        exchange_id=exchange_id_new(),
        recorder=messages.append,
    )
    return _turn_record(
        user=user,
        server=server,
        token=token,
        prompt=prompt,
        exchange=exchange,
        transcript=transcript_capped(messages, known=(token.value,)),
    )


def exchange_id_new() -> str:
    """Random, so that no other client's X-Request-ID is likely to collide with it."""
    return uuid.uuid4().hex


def rendered_discovery(discovery) -> dict:
    return {
        "protocol_version": discovery.protocol_version,
        "session_issued": discovery.session_issued,
        "tools": list(discovery.tool_names),
        "pin_state": discovery.pin_state,
        # The allowed tool as the server describes it (its pinned definition's own fields).
        "tool": discovery.tool,
        "tool_title": str(discovery.definition.get("title") or ""),
        "tool_description": str(discovery.definition.get("description") or ""),
        "tool_input_schema": discovery.definition.get("inputSchema") or {},
    }


def rendered_answer(answer: dict) -> dict:
    """The answer as the console shows it: columns with masked ones marked, rows as cells."""
    answer = _finite(answer)
    masked = set(answer.get("masked_columns") or [])
    columns = [
        {"name": c.get("name", ""), "label": c.get("label", ""), "masked": c.get("name") in masked}
        for c in answer.get("columns") or []
    ]
    rows = [[row.get(c["name"]) for c in columns] for row in answer.get("rows") or []]
    interpretation = answer.get("interpretation") or {}
    help_ = interpretation.get("help") or {}
    return {
        "columns": columns,
        "rows": rows,
        "truncated": bool(answer.get("truncated")),
        "stakeholder": (answer.get("stakeholder") or {}).get("id", ""),
        "interpretation": interpretation.get("summary", ""),
        "understood": interpretation.get("understood") or [],
        "ignored": interpretation.get("ignored") or [],
        "help": help_.get("message", ""),
        "examples": help_.get("examples", []),
        "chart": chart_hint(answer),
    }


def masked_labels(rendered: dict | None) -> list[str]:
    """The labels of the answer's masked columns, in the answer's order (its name if unlabelled)."""
    return [
        column.get("label") or column.get("name", "")
        for column in (rendered or {}).get("columns") or []
        if column.get("masked")
    ]


def _finite(value):
    """The value with every infinite or NaN number (JSON's 1e400) as None: no JSON column stores
    one, and a server may send them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_finite(item) for item in value]
    return value


def _turn_record(
    *, user, server, token, prompt, exchange: Exchange, transcript: list[dict]
) -> ConsoleTurn:
    """Keep the turn (what the admin saw) and its audit event, both from the same result or
    error, in one transaction."""
    result, error = exchange.result, exchange.error
    http_status: int | None
    status, http_status, message, rendered = "ok", 200, "", {}
    if error is not None:
        public = to_public_mcp_error(error)
        status, http_status, message = public.code, public.http_status, public.message
    elif isinstance(result, CallResult):
        http_status = result.http_status
        rendered = rendered_answer(result.answer or {})
        if result.is_error:
            status, message = "tool_error", (result.text or "")[:300]
    elif isinstance(result, Discovery):
        rendered = rendered_discovery(result)
    known = (token.value,)
    with transaction.atomic():
        turn = ConsoleTurn.objects.create(
            user=user,
            kind=exchange.kind,
            server_id=server.server_id,
            tool=server.default_tool,
            stakeholder_id=token.stakeholder_id,
            # The admin may have pasted a token into the question; it is not kept either.
            prompt=redact_secrets(prompt, known=known),
            status=status,
            http_status=http_status,
            message=redact_secrets(message, known=known),
            row_count=result.row_count if isinstance(result, CallResult) else None,
            rendered=redact_secrets(
                {**rendered, "latency_ms": round(exchange.latency_ms, 1)}, known=known
            ),
            token_prefix=token.prefix,
            token_fingerprint=token.fingerprint,
            request_id=getattr(result, "request_id", "") or "",
            exchange_id=exchange.exchange_id,
            transcript=transcript,
        )
        mcp_exchange_audit(
            exchange=exchange,
            server_id=server.server_id,
            tool=server.default_tool,
            token=token.value,
            stakeholder_id=token.stakeholder_id,
            actor=user.get_username(),
            prompt=prompt,
        )
    return turn


def console_history(*, user):
    return ConsoleTurn.objects.filter(user=user).order_by("-created_at")


def console_turn_viewed(*, turn: ConsoleTurn, viewer) -> None:
    """A superuser opened another admin's turn: allowed, and on the record."""
    audit_record(
        action=AuditEvent.Action.CONSOLE_TURN_VIEWED,
        outcome=AuditEvent.Outcome.ALLOWED,
        actor=viewer.get_username(),
        target=f"console_turn:{turn.pk}",
        detail=f"owner:{turn.user_id}",
    )


def console_history_expire(*, now: datetime | None = None) -> int:
    """Delete every admin's turns older than CONSOLE_HISTORY_RETENTION_DAYS; one audit event says
    how many and up to when, never what they held. Returns how many were deleted."""
    days = settings.CONSOLE_HISTORY_RETENTION_DAYS
    before = (now or timezone.now()) - timedelta(days=days)
    with transaction.atomic():
        deleted, _ = ConsoleTurn.objects.filter(created_at__lt=before).delete()
        audit_record(
            action=AuditEvent.Action.CONSOLE_HISTORY_EXPIRED,
            outcome=AuditEvent.Outcome.CHANGED,
            actor="system",
            target="console_turns",
            changes={"deleted": deleted, "older_than": before.isoformat(), "retention_days": days},
        )
    return deleted


def console_history_delete(*, user, turn_id: int | None = None) -> int:
    turns = ConsoleTurn.objects.filter(user=user)
    if turn_id is not None:
        turns = turns.filter(pk=turn_id)
    deleted, _ = turns.delete()
    return deleted
