"""The admin discovery console: pick a server and a user's token, discover, call, keep history.

The token lives only in this request's memory. History and audit keep a safe projection: what the
admin asked and saw (already masked by the server's VPD policy), never the token.
"""

from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils.translation import gettext as _

from registry.models import ConsoleTurn, McpServer
from registry.presets import PresetFileError, read_token_presets
from registry.tokens import MalformedToken, display_prefix, normalize_token, token_fingerprint


class ConsoleError(ValueError):
    """Something the admin must fix before anything is sent; the message is safe to show."""


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


def console_token(*, stakeholder_id: str = "", one_time_bearer: str = "") -> ConsoleToken:
    if one_time_bearer:
        try:
            value = normalize_token(one_time_bearer)
        except MalformedToken:
            raise ConsoleError(_("토큰 형식이 올바르지 않습니다.")) from None
        return _token(value, stakeholder_id or "")
    if not stakeholder_id:
        raise ConsoleError(_("토큰이 없습니다: 관계자 프리셋을 고르거나 일회용 토큰을 입력하세요."))
    try:
        presets = read_token_presets(settings.VPD_TOKEN_PRESETS_FILE)
    except PresetFileError as exc:
        raise ConsoleError(_("토큰 프리셋 파일을 쓸 수 없습니다: %(why)s") % {"why": exc}) from None
    if stakeholder_id not in presets:
        raise ConsoleError(_("이 관계자의 토큰 프리셋이 없습니다."))
    return _token(presets[stakeholder_id], stakeholder_id)


def _token(value: str, stakeholder_id: str) -> ConsoleToken:
    return ConsoleToken(value, stakeholder_id, display_prefix(value), token_fingerprint(value))


def console_discover(*, user, server: McpServer, token: ConsoleToken) -> ConsoleTurn:
    from registry.mcp_client import discover_kb_tools

    try:
        discovery = discover_kb_tools(server, token.value)
    except Exception as exc:  # every client failure becomes a safe public message
        return _turn_record(
            user=user,
            kind=ConsoleTurn.Kind.DISCOVER,
            server=server,
            token=token,
            prompt="",
            error=exc,
        )
    rendered = {
        "protocol_version": discovery.protocol_version,
        "session_issued": discovery.session_issued,
        "tools": list(discovery.tool_names),
        "pin_state": discovery.pin_state,
    }
    return _turn_record(
        user=user,
        kind=ConsoleTurn.Kind.DISCOVER,
        server=server,
        token=token,
        prompt="",
        result=discovery,
        rendered=rendered,
    )


def console_call(
    *, user, server: McpServer, token: ConsoleToken, prompt: str, limit: int
) -> ConsoleTurn:
    from registry.mcp_client import call_kb_select_ai

    try:
        result = call_kb_select_ai(server, token.value, prompt, limit)
    except Exception as exc:
        return _turn_record(
            user=user,
            kind=ConsoleTurn.Kind.CALL,
            server=server,
            token=token,
            prompt=prompt,
            error=exc,
        )
    return _turn_record(
        user=user,
        kind=ConsoleTurn.Kind.CALL,
        server=server,
        token=token,
        prompt=prompt,
        result=result,
        rendered=rendered_answer(result.answer or {}),
    )


def rendered_answer(answer: dict) -> dict:
    """The answer as the console shows it: columns with masked ones marked, rows as cells."""
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
        "help": help_.get("message", ""),
        "examples": help_.get("examples", []),
    }


def _turn_record(
    *, user, kind, server, token, prompt, result=None, error=None, rendered=None
) -> ConsoleTurn:
    """Keep the turn (what the admin saw) and its audit event, both from the same result or
    error, in one transaction."""
    from registry.mcp_client import CallResult, audit_console_event, to_public_mcp_error

    status, http_status, message = "ok", 200, ""
    if error is not None:
        public = to_public_mcp_error(error)
        status, http_status, message = public.code, public.http_status, public.message
    elif isinstance(result, CallResult):
        http_status = result.http_status
        if result.is_error:
            status, message = "tool_error", (result.text or "")[:300]
    with transaction.atomic():
        turn = ConsoleTurn.objects.create(
            user=user,
            kind=kind,
            server_id=server.server_id,
            tool=server.default_tool,
            stakeholder_id=token.stakeholder_id,
            prompt=prompt,
            status=status,
            http_status=http_status,
            message=message,
            row_count=result.row_count if isinstance(result, CallResult) else None,
            rendered=rendered or {},
            token_prefix=token.prefix,
            token_fingerprint=token.fingerprint,
            request_id=getattr(result, "request_id", "") or "",
        )
        audit_console_event(
            action=f"console.{kind}",
            server_id=server.server_id,
            tool=server.default_tool,
            token=token.value,
            stakeholder_id=token.stakeholder_id,
            actor=user.get_username(),
            result=result,
            error=error,
            prompt=prompt or None,
        )
    return turn


def console_history(*, user):
    return ConsoleTurn.objects.filter(user=user).order_by("-created_at")


def console_history_delete(*, user, turn_id: int | None = None) -> int:
    turns = ConsoleTurn.objects.filter(user=user)
    if turn_id is not None:
        turns = turns.filter(pk=turn_id)
    deleted, _ = turns.delete()
    return deleted
