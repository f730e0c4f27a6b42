"""Writes to the registry, and the discover and call flow of its MCP servers. The admin, the
import command, the console and kb_ask all come through here."""

import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import mcp.types as mcp_types
from django.conf import settings
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from pydantic import ValidationError

from audit.models import AuditEvent
from audit.services import audit_change, audit_record, prompt_fingerprint
from core.tokens import token_fingerprint
from kb.models import Stakeholder
from registry import pinning
from registry.declarations import (
    DEFAULT_KB_BASE_URL_ENV,
    DEFAULT_TIMEOUT_ENV,
    KB_TOOL_NAME,
    TOOL_NAME_RE,
    DeclarationError,
    EndpointError,
    FieldError,
    McpServerDeclaration,
    resolve_kb_mcp_endpoint,
    validate_mcp_server,
)
from registry.mcp.contract import (
    DEFAULT_LIMIT,
    as_declaration,
    check_input_schema,
    checked_prompt,
    clamp_limit,
    schema_bounds,
    select_tool,
    tool_arguments,
)
from registry.mcp.errors import (
    BearerNotForThisServer,
    EndpointUnavailable,
    Forbidden,
    MalformedBearer,
    MalformedResponse,
    McpClientError,
    MissingToken,
    OriginRefused,
    RateLimited,
    ServerDisabled,
    ServerNotRegistered,
    ToolDefinitionChanged,
    ToolNotOffered,
    Unauthorized,
    to_public_mcp_error,
)
from registry.mcp.transport import McpHttpSession
from registry.models import AllowedTool, ConsoleTurn, McpServer, TokenDelegation
from registry.tokens import (
    MIN_TOKEN_BITS,
    MalformedToken,
    display_prefix,
    generate_token,
    normalize_token,
    token_is_trivial,
    token_strength_bits,
)


@dataclass
class ImportReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    errors: list[DeclarationError] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors


def server_save(*, declaration: McpServerDeclaration, actor=None) -> tuple[McpServer, str]:
    """Create or update a server and its allowlist; say if it was created, updated or unchanged.

    The change and its audit event (before/after of the declaration, which holds no secret) commit
    together."""
    values = {
        "enabled": declaration.enabled,
        "provider": declaration.provider,
        "transport": declaration.transport,
        "base_url_env": declaration.base_url_env,
        "endpoint_path": declaration.endpoint_path,
        "endpoint_url": declaration.endpoint_url,
        "token_env": declaration.token_env,
        "auth_delivery": declaration.auth_delivery,
        "timeout_seconds_env": declaration.timeout_seconds_env,
        "timeout_seconds": declaration.timeout_seconds,
        "default_tool": declaration.default_tool,
        "router_mode": declaration.router_mode,
        "description": declaration.description,
    }
    with transaction.atomic():
        server = McpServer.objects.select_for_update().filter(server_id=declaration.id).first()
        before = server.to_declaration().as_mapping() if server is not None else None
        if server is None:
            server = McpServer.objects.create(server_id=declaration.id, **values)
            outcome = "created"
        elif server.to_declaration() == declaration:
            return server, "unchanged"
        else:
            for name, value in values.items():
                setattr(server, name, value)
            server.save()
            outcome = "updated"
        wanted = set(declaration.tool_allowlist)
        server.allowed_tools.exclude(tool_name__in=wanted).delete()
        existing = set(server.allowed_tools.values_list("tool_name", flat=True))
        AllowedTool.objects.bulk_create(
            AllowedTool(server=server, tool_name=name) for name in sorted(wanted - existing)
        )
        audit_change(
            action=AuditEvent.Action(f"registry.server_{outcome}"),
            actor=actor,
            target=declaration.id,
            before=before,
            after=declaration.as_mapping(),
        )
    return server, outcome


def server_delete(*, server: McpServer, actor=None) -> None:
    """Remove a server with its allowlist and pins; the audit event keeps its last declaration."""
    with transaction.atomic():
        before = server.to_declaration().as_mapping()
        server_id = server.server_id
        server.delete()
        audit_change(
            action=AuditEvent.Action.SERVER_DELETED,
            actor=actor,
            target=server_id,
            before=before,
            after=None,
        )


def servers_import(*, rows: Iterable[object], actor=None) -> ImportReport:
    """Validate every row first; write all of them in one transaction, or none if any is invalid."""
    report = ImportReport()
    declarations: list[McpServerDeclaration] = []
    seen: set[str] = set()
    for row in rows:
        try:
            declaration = validate_mcp_server(row)
        except DeclarationError as exc:
            report.errors.append(exc)
            continue
        if declaration.id in seen:
            duplicate = FieldError("id", "appears more than once in the file")
            report.errors.append(DeclarationError(declaration.id, [duplicate]))
            continue
        seen.add(declaration.id)
        declarations.append(declaration)
    if report.errors:
        return report
    with transaction.atomic():
        for declaration in declarations:
            _, outcome = server_save(declaration=declaration, actor=actor)
            getattr(report, outcome).append(declaration.id)
    return report


class DelegationError(ValueError):
    """A delegation request broke a rule; the message is safe to show and names no token."""


def _checked_delegation_terms(*, tools: list[str], expires_at: datetime) -> list[str]:
    now = timezone.now()
    if expires_at <= now:
        raise DelegationError(_("만료 시각은 현재 이후여야 합니다."))
    if expires_at > now + timedelta(days=settings.DELEGATION_MAX_LIFETIME_DAYS):
        raise DelegationError(
            _("만료 시각은 최대 %(days)s일 이내여야 합니다.")
            % {"days": settings.DELEGATION_MAX_LIFETIME_DAYS}
        )
    tools = list(dict.fromkeys(tools))
    if not tools or any(not TOOL_NAME_RE.match(name) for name in tools):
        raise DelegationError(_("허용 도구는 MCP 도구 이름이 하나 이상이어야 합니다."))
    return tools


def delegation_issue(
    *,
    stakeholder: Stakeholder,
    agent_name: str,
    expires_at: datetime,
    tools: list[str] | None = None,
    created_by=None,
) -> tuple[TokenDelegation, str]:
    """Create a delegation with a new random token. The token is returned once and never stored."""
    tools = _checked_delegation_terms(tools=tools or [KB_TOOL_NAME], expires_at=expires_at)
    token = generate_token()
    delegation = _delegation_create(
        token=token,
        source=TokenDelegation.Source.ISSUED,
        stakeholder=stakeholder,
        agent_name=agent_name,
        tools=tools,
        expires_at=expires_at,
        created_by=created_by,
    )
    return delegation, token


def delegation_register(
    *,
    raw_token: str,
    stakeholder: Stakeholder,
    agent_name: str,
    expires_at: datetime,
    tools: list[str] | None = None,
    created_by=None,
) -> TokenDelegation:
    """Record a token issued elsewhere: only its fingerprint is kept."""
    tools = _checked_delegation_terms(tools=tools or [KB_TOOL_NAME], expires_at=expires_at)
    try:
        token = normalize_token(raw_token)
    except MalformedToken:
        raise DelegationError(_("토큰 형식이 올바르지 않습니다.")) from None
    if token_strength_bits(token) < MIN_TOKEN_BITS:
        raise DelegationError(
            _(
                "토큰이 너무 약합니다: 최소 %(bits)s비트가 필요합니다 "
                "(16진수 32자, base64url 22자 이상)."
            )
            % {"bits": MIN_TOKEN_BITS}
        )
    if token_is_trivial(token):
        raise DelegationError(_("반복되는 문자로 된 토큰은 등록할 수 없습니다."))
    if TokenDelegation.objects.filter(fingerprint=token_fingerprint(token)).exists():
        raise DelegationError(_("이미 등록된 토큰입니다."))
    return _delegation_create(
        token=token,
        source=TokenDelegation.Source.REGISTERED,
        stakeholder=stakeholder,
        agent_name=agent_name,
        tools=tools,
        expires_at=expires_at,
        created_by=created_by,
    )


def _delegation_create(*, token: str, source: str, created_by, **terms) -> TokenDelegation:
    with transaction.atomic():
        delegation = TokenDelegation.objects.create(
            fingerprint=token_fingerprint(token),
            display_prefix=display_prefix(token),
            source=source,
            audience=settings.MCP_RESOURCE_URL or "",
            created_by=created_by,
            **terms,
        )
        audit_change(
            action=AuditEvent.Action(f"registry.delegation_{source}"),
            actor=created_by,
            target=f"delegation:{delegation.pk}",
            before=None,
            after=_delegation_snapshot(delegation),
        )
    return delegation


def delegation_revoke(*, delegation: TokenDelegation, reason: str, revoked_by=None) -> bool:
    """Revoke once; a second revoke keeps the first reason. Returns whether this call revoked it."""
    reason = (reason or "").strip()
    if not reason:
        raise DelegationError(_("폐기 사유를 입력하세요."))
    with transaction.atomic():
        before = _delegation_snapshot(delegation)
        updated = TokenDelegation.objects.filter(pk=delegation.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now(), revoked_reason=reason[:500], revoked_by=revoked_by
        )
        delegation.refresh_from_db()
        if updated:
            audit_change(
                action=AuditEvent.Action.DELEGATION_REVOKED,
                actor=revoked_by,
                target=f"delegation:{delegation.pk}",
                before=before,
                after=_delegation_snapshot(delegation),
            )
    return bool(updated)


def _delegation_snapshot(delegation: TokenDelegation) -> dict:
    """The non-secret fields an auditor needs: the prefix and fingerprint, never the token."""
    return {
        "stakeholder_id": delegation.stakeholder_id,
        "agent_name": delegation.agent_name,
        "tools": delegation.tools,
        "audience": delegation.audience,
        "expires_at": delegation.expires_at.isoformat(),
        "display_prefix": delegation.display_prefix,
        "fingerprint": delegation.fingerprint,
        "source": delegation.source,
        "revoked_at": delegation.revoked_at.isoformat() if delegation.revoked_at else None,
        "revoked_reason": delegation.revoked_reason,
    }


# Coarse on purpose: at most one write per delegation a minute keeps the hot path cheap.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def delegation_mark_used(*, delegation_id: int, now: datetime) -> None:
    if TokenDelegation.objects.filter(pk=delegation_id, last_used_at__isnull=True).update(
        last_used_at=now
    ):
        from registry.renewal import predecessor_retire_on_first_use

        predecessor_retire_on_first_use(successor_id=delegation_id)
        return
    TokenDelegation.objects.filter(pk=delegation_id).filter(
        models.Q(last_used_at__isnull=True) | models.Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    ).update(last_used_at=now)


# --- discovering and calling MCP servers ----------------------------------------------------

# POC3_MCP_TIMEOUT_SECONDS (or a server's own variable) when it is unset or unusable.
DEFAULT_TIMEOUT_SECONDS = 90


def resolve_endpoint(server: McpServerDeclaration, environ: Mapping[str, str] | None = None) -> str:
    """The URL to POST to. KB: its base URL variable (settings first) + /mcp; else endpoint_url."""
    if environ is None:
        environ = _settings_environ(server.base_url_env or DEFAULT_KB_BASE_URL_ENV)
    try:
        return resolve_kb_mcp_endpoint(server, environ)
    except EndpointError as exc:
        raise EndpointUnavailable(str(exc)) from None


def effective_timeout(
    server: McpServerDeclaration,
    timeout: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> float:
    """POC3_MCP_TIMEOUT_SECONDS (or the server's timeout variable); a server's own
    timeout_seconds and an explicit `timeout` may only lower it."""
    name = server.timeout_seconds_env or DEFAULT_TIMEOUT_ENV
    source = _settings_environ(name) if environ is None else environ
    try:
        seconds = float(source.get(name) or DEFAULT_TIMEOUT_SECONDS)
    except (TypeError, ValueError):
        seconds = DEFAULT_TIMEOUT_SECONDS
    if seconds <= 0:
        seconds = DEFAULT_TIMEOUT_SECONDS
    for lower in (server.timeout_seconds, timeout):
        if lower is not None and 0 < lower < seconds:
            seconds = float(lower)
    return seconds


def _settings_environ(name: str) -> dict[str, str]:
    """The process environment, with the Django setting of the same name taking precedence."""
    environ = dict(os.environ)
    value = getattr(settings, name, None) if settings.configured else None
    if value not in (None, ""):
        environ[name] = str(value)
    return environ


def bearer_for(server: McpServerDeclaration, token: str | None) -> str | None:
    """The bearer to send to this server, or None for a server declared without authentication.

    The KB VPD server (per-request VPD bearer, URL from KB_MCP_BASE_URL only): the user's token,
    required. A service-token server: the token from its own `token_env` variable. No-auth:
    nothing. A user's token never goes anywhere but the KB server, whatever a row says.
    """
    if server.auth_delivery == "none":
        return None
    if server.auth_delivery == "service_token_env":
        token = os.environ.get(server.token_env, "") if server.token_env else ""
    elif server.auth_delivery != "per_request_vpd_bearer" or not server.is_kb:
        raise BearerNotForThisServer("a user's VPD bearer goes only to the KB VPD server")
    if token is None or not str(token).strip():
        raise MissingToken("no bearer token")
    try:
        return normalize_token(token)
    except MalformedToken:
        raise MalformedBearer("token is not a valid bearer token") from None


@dataclass(frozen=True)
class Discovery:
    """What discovery found on a server.

    pin_state: "pinned" (first seen now: trusted on first use), "unchanged", "held" (the
    definition changed; calls wait for an admin's approval), or "unregistered" (the declaration
    is not a registered server; nothing stored).
    """

    server_id: str
    endpoint: str
    protocol_version: str
    session_issued: bool
    server_info: dict
    tool_names: tuple[str, ...]
    tool: str
    definition: dict
    definition_hash: str
    pin_state: str
    request_id: str


@dataclass(frozen=True)
class CallResult:
    """The answer of one tools/call. `answer` is the structuredContent (None if there is none);
    `text` the text content joined; `request_id` the X-Request-ID of the tools/call request."""

    server_id: str
    tool: str
    answer: dict | None
    is_error: bool
    text: str
    request_id: str
    http_status: int
    protocol_version: str
    session_issued: bool
    limit: int
    pin_state: str
    content_types: tuple[str, ...] = field(default=())

    @property
    def row_count(self) -> int | None:
        if not isinstance(self.answer, dict):
            return None
        count = self.answer.get("row_count")
        if isinstance(count, int) and not isinstance(count, bool):
            return count
        rows = self.answer.get("rows")
        return len(rows) if isinstance(rows, list) else None


def kb_tools_discover(
    *,
    server,
    token: str | None,
    actor=None,
    tool: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float | None = None,
    trust_first_use: bool = False,
) -> Discovery:
    """initialize → notifications/initialized → tools/list, then check the allowed tool.

    `server`: an McpServer or an McpServerDeclaration. `token`: the current user's VPD bearer
    (with or without "Bearer "), kept in memory and sent only in the Authorization header.
    `tool`: an allowlisted tool other than the default (a `direct` server needs none).
    `environ`: where KB_MCP_BASE_URL and the timeout variable are read (default: settings, then
    the process environment). `timeout`: may only lower the configured timeout.

    Checks the tool is listed and its input schema takes prompt/limit, then compares every listed
    tool with its pin (`pinning.tool_pins_check`: `trust_first_use` says whether the asker may
    pin a server seen for the first time; `actor` is who is asking, for the audit). Raises an
    McpClientError (see `to_public_mcp_error`); no request is sent when the token is missing,
    the tool is not allowlisted or the URL cannot be resolved.
    """
    declaration, url, bearer, tool_name, seconds = _prepare(server, token, tool, environ, timeout)
    with McpHttpSession(url, token=bearer, timeout=seconds) as session:
        session.initialize()
        session.notify_initialized()
        tools = session.list_tools()
        session_issued = session.session_id is not None
        request_id = session.last_request_id
    definition = _checked_definition(tools, tool_name, request_id)
    pin = _pin_check(declaration, tools, tool_name, trust_first_use, actor, request_id)
    return Discovery(
        server_id=declaration.id,
        endpoint=url,
        protocol_version=session.protocol_version,
        session_issued=session_issued,
        server_info=session.server_info,
        tool_names=tuple(t.get("name", "") for t in tools if isinstance(t.get("name"), str)),
        tool=tool_name,
        definition=pinning.canonical_tool_definition(definition),
        definition_hash=pinning.tool_definition_hash(definition),
        pin_state=pin.state,
        request_id=request_id,
    )


def kb_tool_call(
    *,
    server,
    token: str | None,
    prompt: str,
    limit: int = DEFAULT_LIMIT,
    actor=None,
    tool: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float | None = None,
    trust_first_use: bool = False,
) -> CallResult:
    """The whole flow, then one tools/call with only `prompt` and the clamped `limit`.

    Arguments as for `kb_tools_discover`; `prompt` is a non-blank string of at most
    MCP_PROMPT_MAX_LENGTH characters (and the tool's maxLength), `limit` an integer clamped to
    1..100 (and the tool's own bounds). Before any request: token present and well-formed,
    tool allowlisted, server registered and enabled, prompt and limit valid. Before tools/call:
    the tool is listed, takes prompt/limit, and its definition matches its pin (else
    ToolDefinitionChanged: held until an admin approves). tools/call is never retried: after a
    timeout or an error, exactly one tools/call was sent. A tool's own failure is not an
    exception: `is_error` is set and `text` says what the tool said.
    """
    declaration, url, bearer, tool_name, seconds = _prepare(server, token, tool, environ, timeout)
    registered = _registered(declaration)
    if registered is None:
        raise ServerNotRegistered("tools are only called on registered servers")
    prompt = checked_prompt(prompt, max_length=settings.MCP_PROMPT_MAX_LENGTH)
    limit = clamp_limit(limit)
    with McpHttpSession(url, token=bearer, timeout=seconds) as session:
        session.initialize()
        session.notify_initialized()
        tools = session.list_tools()
        definition = _checked_definition(tools, tool_name, session.last_request_id)
        max_length, minimum, maximum = schema_bounds(definition)
        if max_length is not None:
            prompt = checked_prompt(prompt, max_length=max_length)
        limit = clamp_limit(limit, minimum=minimum, maximum=maximum)
        pin = _pin_check(
            registered, tools, tool_name, trust_first_use, actor, session.last_request_id
        )
        if pin.state == pinning.HELD:
            raise ToolDefinitionChanged("the tool's definition changed; an admin must approve it")
        result = session.call_tool(tool_name, tool_arguments(prompt, limit))
        request_id, status = session.last_request_id, session.last_status
        session_issued = session.session_id is not None
        context = {"rpc_method": "tools/call", "request_id": request_id, "http_status": status}
    parsed = _call_result(result, definition, context)
    texts = [c.text for c in parsed.content if isinstance(c, mcp_types.TextContent)]
    return CallResult(
        server_id=declaration.id,
        tool=tool_name,
        answer=parsed.structured_content,
        is_error=bool(parsed.is_error),
        text="\n".join(texts),
        request_id=request_id,
        http_status=status or 0,
        protocol_version=session.protocol_version or "",
        session_issued=session_issued,
        limit=limit,
        pin_state=pin.state,
        content_types=tuple(c.type for c in parsed.content),
    )


def _prepare(server, token, tool, environ, timeout):
    """Everything checked before the first request is sent."""
    declaration = as_declaration(server)
    if not declaration.enabled:
        raise ServerDisabled("server is disabled")
    tool_name = select_tool(declaration, tool)
    bearer = bearer_for(declaration, token)
    url = resolve_endpoint(declaration, environ)
    seconds = effective_timeout(declaration, timeout, environ)
    return declaration, url, bearer, tool_name, seconds


def _registered(declaration: McpServerDeclaration):
    """The registered server this declaration is, or None (unregistered, or registered
    differently: pins belong to what is registered)."""
    server = (
        McpServer.objects.filter(server_id=declaration.id).prefetch_related("allowed_tools").first()
    )
    if server is None or server.to_declaration() != declaration:
        return None
    return server


def _pin_check(server, tools, tool_name, trust_first_use, actor, request_id):
    """The pin state of `tool_name`, every listed tool checked against its pin."""
    registered = server if not isinstance(server, McpServerDeclaration) else _registered(server)
    try:
        checks = pinning.tool_pins_check(
            server=registered, definitions=tools, trust_first_use=trust_first_use, actor=actor
        )
    except pinning.TooManyTools:
        raise MalformedResponse(
            "the server lists too many tools", rpc_method="tools/list", request_id=request_id
        ) from None
    return checks[tool_name]


def _checked_definition(tools: list[dict], tool_name: str, request_id: str) -> dict:
    matches = [t for t in tools if t.get("name") == tool_name]
    context = {"rpc_method": "tools/list", "request_id": request_id}
    if not matches:
        raise ToolNotOffered("the allowed tool is not listed", **context)
    if len(matches) > 1:
        raise MalformedResponse("the tool is listed twice", **context)
    try:
        mcp_types.Tool.model_validate(matches[0])
    except ValidationError:
        raise MalformedResponse("the tool definition is malformed", **context) from None
    check_input_schema(matches[0])
    return matches[0]


def _call_result(result: dict, definition: Mapping, context: dict) -> mcp_types.CallToolResult:
    try:
        parsed = mcp_types.CallToolResult.model_validate(result)
    except ValidationError:
        raise MalformedResponse("tools/call result is not a CallToolResult", **context) from None
    structured = parsed.structured_content
    if structured is not None and not isinstance(structured, dict):
        raise MalformedResponse("structuredContent is not an object", **context)
    output_schema = definition.get("outputSchema")
    if isinstance(output_schema, Mapping) and not parsed.is_error:
        # The spec: a tool with an outputSchema must return conforming structuredContent.
        import jsonschema

        if structured is None:
            raise MalformedResponse("structuredContent missing", **context)
        try:
            validator = jsonschema.validators.validator_for(output_schema)
            validator(output_schema).validate(structured)
        except (jsonschema.ValidationError, jsonschema.SchemaError):
            raise MalformedResponse(
                "structuredContent breaks the outputSchema", **context
            ) from None
    return parsed


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


def mcp_exchange_run(
    *,
    kind: str,
    server: McpServer,
    token: str,
    prompt: str = "",
    limit: int = DEFAULT_LIMIT,
    trust_first_use: bool,
    actor=None,
) -> Exchange:
    """Discover (`kind` "discover") or call ("call") a registered server with this token.

    Never raises: whatever goes wrong, from a refused URL to a server answering garbage, comes
    back as the exchange's error for `to_public_mcp_error` to put in Korean."""
    started = time.perf_counter()
    try:
        if kind == ConsoleTurn.Kind.DISCOVER:
            result = kb_tools_discover(
                server=server, token=token, actor=actor, trust_first_use=trust_first_use
            )
        else:
            result = kb_tool_call(
                server=server,
                token=token,
                prompt=prompt,
                limit=limit,
                actor=actor,
                trust_first_use=trust_first_use,
            )
    except Exception as exc:  # every failure becomes a safe public message and an audit event
        return Exchange(kind, error=exc, latency_ms=_since(started))
    return Exchange(kind, result=result, latency_ms=_since(started))


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


_EXCHANGE_ACTIONS = {
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
    request id, server, tool, row count, latency, the token's display prefix and keyed
    fingerprint (never the token), a keyed hash of the prompt (never its text)."""
    kind = exchange.kind if exchange is not None else kind
    values: dict = {
        "action": _EXCHANGE_ACTIONS[kind],
        "target": server_id[:128],
        "tool": (tool or "")[:128],
        "stakeholder_id": stakeholder_id[:16],
        "stakeholder_role": stakeholder_role[:32],
        "actor": actor[:150],
        "latency_ms": exchange.latency_ms if exchange is not None else None,
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
        values["detail"] = refusal.code[:128]
    elif error is not None:
        public = to_public_mcp_error(error)
        values["outcome"] = failure_outcome(error)
        values["http_status"] = public.http_status
        # An unexpected failure names its exception class (never its message) for diagnosis.
        values["detail"] = (
            public.code if public.code != "error" else f"error:{type(error).__name__}"
        )
        if isinstance(error, McpClientError):
            values["request_id"] = error.request_id[:64]
            values["rpc_method"] = error.rpc_method[:64]
    elif isinstance(result, CallResult):
        values["outcome"] = (
            AuditEvent.Outcome.TOOL_ERROR if result.is_error else AuditEvent.Outcome.ALLOWED
        )
        values["http_status"] = result.http_status
        values["request_id"] = result.request_id[:64]
        values["rpc_method"] = "tools/call"
        values["row_count"] = result.row_count
        values["tool"] = result.tool[:128]
    elif isinstance(result, Discovery):
        values["outcome"] = AuditEvent.Outcome.ALLOWED
        values["http_status"] = 200
        values["request_id"] = result.request_id[:64]
        values["rpc_method"] = "tools/list"
        values["tool"] = result.tool[:128]
        values["detail"] = f"pin:{result.pin_state}"
    else:
        values["outcome"] = AuditEvent.Outcome.ERROR
    return audit_record(**values)
