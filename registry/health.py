"""Server health: "Check now" discovers a server as a service check, with no user's bearer, and
keeps the last result per server (when, the result, latency, tool count, the error in words).

A server that takes a service token (or none) is discovered in full: initialize, initialized,
tools/list. The KB VPD server takes only a user's bearer, so it is asked to initialize without
one: a 401 with a Bearer challenge is its healthy answer ("answers, asks for a VPD token"), and
its tools are counted from their pins.
"""

import time

from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from audit.models import AuditEvent
from audit.services import audit_change
from registry.mcp.calls import bearer_for, effective_timeout, resolve_endpoint
from registry.mcp.errors import McpClientError, Unauthorized, to_public_mcp_error
from registry.mcp.transport import McpHttpSession
from registry.models import McpServer, ServerCheck, ToolPin

# A health check waits at most this long, whatever the server's own timeout.
CHECK_TIMEOUT_SECONDS = 10


def server_check(*, server: McpServer, actor=None) -> ServerCheck:
    """Discover `server` now as a service check; record and audit the result."""
    declaration = server.to_declaration()
    started = time.monotonic()
    ok, tool_count, result = _probe(server, declaration)
    latency_ms = round((time.monotonic() - started) * 1000) if ok is not None else None
    with transaction.atomic():
        check, _created = ServerCheck.objects.update_or_create(
            server=server,
            defaults={
                "checked_at": timezone.now(),
                "ok": bool(ok),
                "latency_ms": latency_ms,
                "tool_count": tool_count,
                "result": str(result)[:300],
                "checked_by": actor.get_username() if actor is not None else "",
            },
        )
        audit_change(
            action=AuditEvent.Action.SERVER_CHECKED,
            actor=actor,
            target=server.server_id,
            before=None,
            after={
                "ok": check.ok,
                "latency_ms": check.latency_ms,
                "tool_count": check.tool_count,
                "result": check.result,
            },
        )
    return check


def _probe(server: McpServer, declaration):
    """(ok, tool count, the result in words); ok is None when nothing could be sent."""
    try:
        url = resolve_endpoint(declaration)
        seconds = effective_timeout(declaration, CHECK_TIMEOUT_SECONDS)
        if declaration.is_kb:
            return _probe_kb(server, url, seconds)
        bearer = bearer_for(declaration, None)
        with McpHttpSession(url, token=bearer, timeout=seconds) as session:
            session.initialize()
            session.notify_initialized()
            tools = session.list_tools()
    except McpClientError as exc:
        sent = exc.http_status is not None or exc.code in ("timeout", "connection_failed")
        return (False if sent else None), None, to_public_mcp_error(exc).message
    except Exception as exc:  # noqa: BLE001  (a check reports any failure, it never raises)
        return None, None, to_public_mcp_error(exc).message
    return True, len(tools), _("응답함: 도구 %(n)s개") % {"n": len(tools)}


def _probe_kb(server: McpServer, url: str, seconds: float):
    pinned = ToolPin.objects.filter(server=server).count()
    try:
        with McpHttpSession(url, token=None, timeout=seconds) as session:
            session.initialize()
    except Unauthorized:
        return (
            True,
            pinned,
            _("응답함: VPD 토큰을 요구합니다 (정상). 도구 수는 고정된 정의 %(n)s개 기준")
            % {"n": pinned},
        )
    # An MCP server that answers without any token is not the KB VPD server it should be.
    return False, pinned, _("토큰 없이 응답했습니다: KB VPD 서버라면 토큰을 요구해야 합니다.")


def server_checks_run(*, servers, actor=None) -> list[ServerCheck]:
    return [server_check(server=server, actor=actor) for server in servers]
