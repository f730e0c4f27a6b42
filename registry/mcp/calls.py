"""The discover and call flow of the registry's MCP servers, beside the MCP client it drives
(registry.mcp): which endpoint and bearer, the tool pins, the checked call and its result."""

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import mcp.types as mcp_types
from django.conf import settings
from pydantic import ValidationError

from registry import pinning
from registry.declarations import (
    DEFAULT_KB_BASE_URL_ENV,
    DEFAULT_TIMEOUT_ENV,
    EndpointError,
    McpServerDeclaration,
    resolve_kb_mcp_endpoint,
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
    ErrorContext,
    MalformedBearer,
    MalformedResponse,
    MissingToken,
    ServerDisabled,
    ServerNotRegistered,
    ToolDefinitionChanged,
    ToolNotOffered,
)
from registry.mcp.transport import McpHttpSession, TranscriptRecorder
from registry.models import McpServer
from registry.tokens import (
    MalformedToken,
    normalize_token,
)

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
    exchange_id: str | None = None,
    recorder: TranscriptRecorder | None = None,
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
    the tool is not allowlisted or the URL cannot be resolved. `exchange_id` and `recorder`: see
    McpHttpSession.
    """
    declaration, url, bearer, tool_name, seconds = _prepare(server, token, tool, environ, timeout)
    with McpHttpSession(
        url, token=bearer, timeout=seconds, exchange_id=exchange_id, recorder=recorder
    ) as session:
        session.initialize()
        session.notify_initialized()
        tools = session.list_tools()
        session_issued = session.session_id is not None
        request_id = session.last_request_id
        protocol_version = session.protocol_version
        assert protocol_version is not None  # initialize() set it or raised
    definition = _checked_definition(tools, tool_name, request_id)
    pin = _pin_check(declaration, tools, tool_name, trust_first_use, actor, request_id)
    return Discovery(
        server_id=declaration.id,
        endpoint=url,
        protocol_version=protocol_version,
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
    exchange_id: str | None = None,
    recorder: TranscriptRecorder | None = None,
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
    with McpHttpSession(
        url, token=bearer, timeout=seconds, exchange_id=exchange_id, recorder=recorder
    ) as session:
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
    context: ErrorContext = {"rpc_method": "tools/list", "request_id": request_id}
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
