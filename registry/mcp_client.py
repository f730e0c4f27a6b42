"""The MCP client that discovers and calls registered servers over Streamable HTTP.

A strict client on httpx, not the official SDK's: it never follows a redirect (an Authorization
header must never reach another origin) and it reports 401, 403 and 429 as themselves. The
bearer lives only in memory and only in the Authorization header. The helpers at the top are pure
and network-free; `McpHttpSession` is the transport; `discover_kb_tools` and `call_kb_select_ai`
are the product's flow (initialize → notifications/initialized → tools/list → checks → tools/call).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

import anyio
import httpx
import mcp.types as mcp_types
from pydantic import ValidationError

from core.outbound import ByteBudget, ResponseTooLarge, outbound_async_client
from kb.catalogue import MAX_LIMIT, MIN_LIMIT
from registry.declarations import (
    DEFAULT_KB_BASE_URL_ENV,
    DEFAULT_TIMEOUT_ENV,
    EndpointError,
    McpServerDeclaration,
    resolve_kb_mcp_endpoint,
)
from registry.tokens import (
    MalformedToken,
    TooDeeplyNested,
    looks_like_secret,
    normalize_token,
    redact_secrets,
)

REQUESTED_PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
CLIENT_INFO = {"name": "hyperbook", "title": "hyperbook MCP client", "version": "0.1.0"}
LIMIT_MIN, LIMIT_MAX = MIN_LIMIT, MAX_LIMIT
DEFAULT_LIMIT = 50
DEFAULT_TIMEOUT_SECONDS = 90

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
MAX_ERROR_BODY_BYTES = 4096
MAX_TOOL_PAGES = 20
MAX_STREAM_RESUMPTIONS = 3
MAX_RESUME_WAIT_SECONDS = 5.0
SESSION_ID_RE = re.compile(r"^[\x21-\x7e]{1,256}$")
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
SAFE_VERSION_RE = re.compile(r"^[A-Za-z0-9._-]{1,32}$")
USER_AGENT = "hyperbook-mcp-client/0.1"


# --- errors --------------------------------------------------------------------------------------


class McpClientError(Exception):
    """A failure of discovery or a call. Messages are ours: never server text, never the token.

    `code` names the failure for the UI (`to_public_mcp_error`) and the audit trail;
    `request_id` is the X-Request-ID of the HTTP request concerned, when one was sent.
    """

    code = "error"

    def __init__(
        self,
        message: str = "",
        *,
        http_status: int | None = None,
        request_id: str = "",
        rpc_method: str = "",
    ):
        super().__init__(message or self.__class__.__doc__ or self.code)
        self.http_status = http_status
        self.request_id = request_id
        self.rpc_method = rpc_method


class MissingToken(McpClientError):
    """No bearer token was given; nothing was sent."""

    code = "missing_token"


class MalformedBearer(McpClientError):
    """The bearer token is not a valid token; nothing was sent."""

    code = "malformed_token"


class BearerNotForThisServer(McpClientError):
    """The server is not the KB VPD server: it never receives a user's bearer; nothing was sent."""

    code = "bearer_refused"


class EndpointUnavailable(McpClientError):
    """The server's URL is not configured or not safe; nothing was sent."""

    code = "endpoint_unavailable"


class ServerDisabled(McpClientError):
    """The server is disabled in the registry; nothing was sent."""

    code = "server_disabled"


class ServerNotRegistered(McpClientError):
    """Tools are only called on registered servers (their pins live in the registry)."""

    code = "server_not_registered"


class ToolNotAllowed(McpClientError):
    """The tool is not on the server's allowlist; nothing was sent."""

    code = "tool_not_allowed"


class InvalidArguments(McpClientError):
    """The prompt or limit breaks the tool's contract; nothing was sent."""

    code = "invalid_arguments"


class ToolNotOffered(McpClientError):
    """tools/list does not contain the allowed tool."""

    code = "tool_not_offered"


class ToolContractMismatch(McpClientError):
    """The allowed tool's input schema does not match the prompt/limit contract."""

    code = "tool_contract_mismatch"


class ToolDefinitionChanged(McpClientError):
    """The tool's definition differs from its pinned one; calls wait for an admin's approval."""

    code = "tool_held"


class HttpStatusError(McpClientError):
    """The server answered with an unexpected HTTP status."""

    code = "http_error"


class Unauthorized(HttpStatusError):
    """401: the token is missing, invalid or expired."""

    code = "unauthorized"


class Forbidden(HttpStatusError):
    """403: the token is valid but its user may not do this."""

    code = "forbidden"


class OriginRefused(HttpStatusError):
    """403 (or 421) from the server's Origin/Host protection, not from a permission check."""

    code = "origin_refused"


class RateLimited(HttpStatusError):
    """429: too many requests."""

    code = "rate_limited"

    def __init__(self, message: str = "", *, retry_after: int | None = None, **kwargs):
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class SessionExpired(HttpStatusError):
    """404 on a request that carried a session id: the server ended the session."""

    code = "session_expired"


class ServerError(HttpStatusError):
    """5xx from the server."""

    code = "server_error"


class RedirectRefused(HttpStatusError):
    """The server answered with a redirect; redirects are never followed."""

    code = "redirect_refused"


class McpTimeout(McpClientError):
    """The server did not answer in time (tools/call is never retried automatically)."""

    code = "timeout"


class ConnectionFailed(McpClientError):
    """The server could not be reached."""

    code = "connection_failed"


class MalformedResponse(McpClientError):
    """The answer is not a well-formed JSON-RPC/MCP message for our request."""

    code = "malformed_response"


class ProtocolMismatch(McpClientError):
    """The server answered initialize with a protocol version this client does not support."""

    code = "protocol_mismatch"

    def __init__(self, message: str = "", *, version: str = "", **kwargs):
        super().__init__(message, **kwargs)
        self.version = version if SAFE_VERSION_RE.match(version or "") else ""


class JsonRpcError(McpClientError):
    """The server answered the request with a JSON-RPC error (its message is not kept)."""

    code = "rpc_error"

    def __init__(self, message: str = "", *, error_code: int | None = None, **kwargs):
        super().__init__(message, **kwargs)
        self.error_code = error_code


# --- public messages -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicMcpError:
    """What a user may be shown about a failure. `retryable`: the user may try again (by hand;
    nothing is ever retried automatically)."""

    code: str
    message: str
    http_status: int | None = None
    retryable: bool = False


GENERAL_MESSAGE = "MCP 서버와 통신하는 중 오류가 발생했습니다."
PUBLIC_MESSAGES: dict[str, tuple[str, bool]] = {
    "missing_token": ("VPD 토큰을 선택하거나 입력하세요. 요청을 보내지 않았습니다.", False),
    "malformed_token": ("토큰 형식이 올바르지 않습니다. 요청을 보내지 않았습니다.", False),
    "unauthorized": ("토큰이 유효하지 않거나 만료됨", False),
    "forbidden": ("이 사용자에게 조회 권한 없음", False),
    "rate_limited": ("잠시 후 다시 시도하세요", True),
    "timeout": ("MCP 서버 응답 시간이 초과되었습니다. 잠시 후 다시 시도하세요.", True),
    "redirect_refused": (
        "MCP 서버가 다른 주소로 이동하라고 응답해 요청을 중단했습니다.",
        False,
    ),
    # The contract: a wrong Origin is shown as a general error.
    "origin_refused": (GENERAL_MESSAGE, False),
    "malformed_response": ("MCP 서버의 응답 형식이 올바르지 않습니다.", False),
    "protocol_mismatch": ("MCP 서버의 프로토콜 버전을 지원하지 않습니다.", False),
    "connection_failed": ("MCP 서버에 연결할 수 없습니다. 잠시 후 다시 시도하세요.", True),
    "tool_not_allowed": ("허용되지 않은 도구입니다. 요청을 보내지 않았습니다.", False),
    "tool_not_offered": ("MCP 서버가 허용된 도구를 제공하지 않습니다.", False),
    "tool_contract_mismatch": ("MCP 서버 도구의 입력 형식이 계약과 다릅니다.", False),
    "tool_held": (
        "도구 정의가 변경되어 관리자가 승인할 때까지 호출이 보류되었습니다.",
        False,
    ),
    "invalid_arguments": ("질문 또는 조회 건수가 올바르지 않습니다.", False),
    "endpoint_unavailable": ("MCP 서버 주소가 설정되지 않았거나 올바르지 않습니다.", False),
    "bearer_refused": (
        "사용자 VPD 토큰은 KB VPD 서버에만 보낼 수 있습니다. 요청을 보내지 않았습니다.",
        False,
    ),
    "server_disabled": ("사용하지 않도록 설정된 MCP 서버입니다.", False),
    "server_not_registered": ("등록된 MCP 서버가 아닙니다.", False),
    "session_expired": ("MCP 세션이 만료되었습니다. 다시 시도하세요.", True),
    "server_error": ("MCP 서버 오류가 발생했습니다. 잠시 후 다시 시도하세요.", True),
    "rpc_error": ("MCP 서버가 요청을 처리하지 못했습니다.", False),
    "http_error": (GENERAL_MESSAGE, False),
    "error": (GENERAL_MESSAGE, False),
}


def to_public_mcp_error(exc: BaseException) -> PublicMcpError:
    """A safe Korean message for any failure: no server text, no URL, no token."""
    if isinstance(exc, McpClientError):
        code, status = exc.code, exc.http_status
    elif isinstance(exc, EndpointError):
        code, status = "endpoint_unavailable", None
    elif isinstance(exc, MalformedToken):
        code, status = "malformed_token", None
    elif isinstance(exc, httpx.TimeoutException):
        code, status = "timeout", None
    elif isinstance(exc, httpx.TransportError):
        code, status = "connection_failed", None
    else:
        code, status = "error", None
    message, retryable = PUBLIC_MESSAGES.get(code, PUBLIC_MESSAGES["error"])
    return PublicMcpError(code=code, message=message, http_status=status, retryable=retryable)


# --- pure helpers --------------------------------------------------------------------------------


def mcp_headers(
    token: str | None, version: str | None = None, session_id: str | None = None
) -> dict[str, str]:
    """The headers of one MCP POST. The token is normalised and goes only here.

    `version` is the negotiated protocol version (absent on initialize); `session_id` only if the
    server issued one. `token=None` (a server declared without authentication) sends none.
    """
    headers = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    if token is not None:
        headers["Authorization"] = f"Bearer {normalize_token(token)}"
    if session_id is not None:
        if not SESSION_ID_RE.match(session_id):
            raise MalformedResponse("session id is not visible ASCII")
        headers["Mcp-Session-Id"] = session_id
    return headers


def as_declaration(server) -> McpServerDeclaration:
    """An McpServer row or a declaration, as a declaration."""
    if isinstance(server, McpServerDeclaration):
        return server
    to_declaration = getattr(server, "to_declaration", None)
    if to_declaration is None:
        raise TypeError("server must be an McpServer or an McpServerDeclaration")
    return to_declaration()


def select_tool(server: McpServerDeclaration, tool: str | None = None) -> str:
    """The tool to call: the one asked for if allowlisted (exact match), else the default tool.

    A `direct` server has one allowed tool and no router: its default tool is chosen directly.
    """
    name = server.default_tool if tool is None else tool
    if not isinstance(name, str) or name not in server.tool_allowlist:
        raise ToolNotAllowed("tool is not on the server's allowlist")
    return name


def clamp_limit(limit: object, *, minimum: int = LIMIT_MIN, maximum: int = LIMIT_MAX) -> int:
    """An integer limit clamped into minimum..maximum (never outside 1..100)."""
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidArguments("limit must be an integer")
    low, high = max(LIMIT_MIN, minimum), min(LIMIT_MAX, maximum)
    if low > high:
        low, high = LIMIT_MIN, LIMIT_MAX
    return min(max(limit, low), high)


def checked_prompt(prompt: object, *, max_length: int) -> str:
    """The prompt as sent: a non-blank string of at most `max_length` characters."""
    if not isinstance(prompt, str) or not prompt.strip():
        raise InvalidArguments("prompt must be a non-empty string")
    if len(prompt) > max_length:
        raise InvalidArguments("prompt is too long")
    return prompt


def tool_arguments(prompt: str, limit: int) -> dict:
    """The only arguments a call ever carries."""
    return {"prompt": prompt, "limit": limit}


def check_input_schema(definition: Mapping) -> None:
    """The prompt/limit contract: prompt a string, limit an integer, nothing else required."""
    schema = definition.get("inputSchema")
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        raise ToolContractMismatch("inputSchema must be an object schema")
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        raise ToolContractMismatch("inputSchema has no properties")
    prompt, limit = properties.get("prompt"), properties.get("limit")
    if not isinstance(prompt, Mapping) or prompt.get("type") != "string":
        raise ToolContractMismatch("prompt must be a string property")
    if not isinstance(limit, Mapping) or limit.get("type") != "integer":
        raise ToolContractMismatch("limit must be an integer property")
    required = schema.get("required", [])
    if not isinstance(required, list) or set(required) - {"prompt", "limit"}:
        raise ToolContractMismatch("only prompt and limit may be required")


def schema_bounds(definition: Mapping) -> tuple[int | None, int, int]:
    """(prompt maxLength, limit minimum, limit maximum) as the tool declares them."""
    properties = definition["inputSchema"]["properties"]
    max_length = properties["prompt"].get("maxLength")
    minimum = properties["limit"].get("minimum", LIMIT_MIN)
    maximum = properties["limit"].get("maximum", LIMIT_MAX)

    def integer(value, default):
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    return integer(max_length, None), integer(minimum, LIMIT_MIN), integer(maximum, LIMIT_MAX)


def canonical_tool_definition(definition: Mapping) -> dict:
    """The pinned form of a tool definition: all of it (name, title, description, schemas,
    annotations, icons, _meta and whatever else a client may show or act on), as plain JSON."""
    return json.loads(_canonical_json(definition))


def tool_definition_hash(definition: Mapping) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces, UTF-8) of the whole definition."""
    return hashlib.sha256(_canonical_json(definition).encode()).hexdigest()


def _canonical_json(definition: Mapping) -> str:
    return json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def negotiated_version(result: Mapping) -> str:
    """The protocol version of an initialize result, if this client supports it."""
    version = result.get("protocolVersion")
    if not isinstance(version, str) or version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise ProtocolMismatch(
            "unsupported protocol version", version=version if isinstance(version, str) else ""
        )
    return version


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
    from django.conf import settings

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


# --- the transport -------------------------------------------------------------------------------


@dataclass
class _SseEvent:
    data: str = ""
    event_id: str | None = None
    retry_ms: int | None = None


class McpHttpSession:
    """One MCP conversation over Streamable HTTP with one server: JSON or SSE answers, a session
    id sent only once issued, the negotiated version on every request after initialize.

    Never follows redirects, never reads proxies or .netrc from the environment, never retries a
    request. Each HTTP request has one deadline (`timeout` seconds from the moment it is sent to
    its last byte, headers included) and one byte budget, however slowly or endlessly the server
    writes. A POST whose SSE stream ends before its answer is resumed with GET + Last-Event-ID
    within the same deadline (the request itself is not sent again). Use as a context manager:
    on close, a session the server issued is ended with DELETE.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None,
        timeout: float,
        client_info: Mapping | None = None,
    ):
        self.url = url
        self.timeout = timeout
        self.client_info = dict(client_info or CLIENT_INFO)
        self._bearer = None if token is None else normalize_token(token)
        self.protocol_version: str | None = None
        self.session_id: str | None = None
        self.server_info: dict = {}
        self.last_request_id = ""
        self.last_status: int | None = None
        self._next_id = 0

    def __repr__(self) -> str:
        return f"<McpHttpSession version={self.protocol_version} session={bool(self.session_id)}>"

    def __enter__(self) -> McpHttpSession:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- MCP methods --

    def initialize(self) -> mcp_types.InitializeResult:
        result = self.request(
            "initialize",
            {
                "protocolVersion": REQUESTED_PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": self.client_info,
            },
            initializing=True,
        )
        try:
            version = negotiated_version(result)
        except ProtocolMismatch as exc:
            exc.rpc_method, exc.request_id = "initialize", self.last_request_id
            raise
        try:
            parsed = mcp_types.InitializeResult.model_validate(result)
        except ValidationError:
            raise MalformedResponse(
                "initialize result is not an InitializeResult",
                rpc_method="initialize",
                request_id=self.last_request_id,
            ) from None
        self.protocol_version = version
        self.server_info = {"name": parsed.server_info.name, "version": parsed.server_info.version}
        return parsed

    def notify_initialized(self) -> None:
        self.notify("notifications/initialized")

    def list_tools(self) -> list[dict]:
        """Every tool the server lists (following cursors, bounded), as raw definitions."""
        tools: list[dict] = []
        cursor = None
        for _ in range(MAX_TOOL_PAGES):
            result = self.request("tools/list", {"cursor": cursor} if cursor else None)
            context = {"rpc_method": "tools/list", "request_id": self.last_request_id}
            try:
                parsed = mcp_types.ListToolsResult.model_validate(result)
            except ValidationError:
                raise MalformedResponse("tools/list result is malformed", **context) from None
            raw = result.get("tools")
            if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
                raise MalformedResponse("tools/list without a tool list", **context)
            tools.extend(raw)
            cursor = parsed.next_cursor
            if not cursor:
                return tools
        raise MalformedResponse("tools/list pages never end", rpc_method="tools/list")

    def call_tool(self, name: str, arguments: dict) -> dict:
        """One tools/call, sent exactly once whatever happens."""
        return self.request("tools/call", {"name": name, "arguments": arguments})

    # -- JSON-RPC over HTTP --

    def request(self, method: str, params: dict | None = None, *, initializing=False) -> dict:
        if not initializing and self.protocol_version is None:
            raise McpClientError("initialize first", rpc_method=method)
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        return self._post(message, expect_answer=True)

    def notify(self, method: str, params: dict | None = None) -> None:
        message = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self._post(message, expect_answer=False)

    def close(self) -> None:
        if self.session_id is None:
            return
        headers, _ = self._headers()
        headers.pop("Content-Type")
        self.session_id = None
        try:
            # Best effort: a server may refuse DELETE (405); the session then just expires.
            anyio.run(self._delete, headers, min(self.timeout, 5.0))
        except (httpx.HTTPError, TimeoutError):
            pass

    async def _delete(self, headers: dict, seconds: float) -> None:
        with anyio.fail_after(seconds):
            async with _http_client(seconds) as client:
                await client.delete(self.url, headers=headers)

    def _headers(self) -> tuple[dict[str, str], str]:
        """Headers for the next HTTP request, with a fresh X-Request-ID (also returned)."""
        headers = mcp_headers(self._bearer, self.protocol_version, self.session_id)
        headers["Accept-Encoding"] = "identity"  # the byte budget counts what the server sent
        request_id = uuid.uuid4().hex
        headers["X-Request-ID"] = request_id
        return headers, request_id

    def _post(self, message: dict, *, expect_answer: bool) -> dict | None:
        """One POST. `last_request_id` ends as its X-Request-ID (the server's echo if valid)."""
        method = message["method"]
        headers, request_id = self._headers()
        self.last_request_id, self.last_status = request_id, None
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        context = {"rpc_method": method, "request_id": request_id}
        try:
            # Each POST runs on an event loop of its own so that one deadline (fail_after) covers
            # the connection, the headers and every byte of the body; httpx's own timeouts are
            # per read, and a server dripping a byte a second would never trip them.
            return anyio.run(self._exchange, message, body, headers, context, expect_answer)
        except (TimeoutError, httpx.TimeoutException):  # our deadline, or httpx's per read
            raise McpTimeout("no answer in time", **context) from None
        except ResponseTooLarge:
            raise MalformedResponse("the answer is too large", **context) from None
        except httpx.TransportError as exc:
            raise ConnectionFailed(
                f"could not reach the server ({type(exc).__name__})", **context
            ) from exc

    async def _exchange(self, message, body, headers, context, expect_answer) -> dict | None:
        with anyio.fail_after(self.timeout):
            async with (
                _http_client(self.timeout) as client,
                client.stream("POST", self.url, content=body, headers=headers) as response,
            ):
                answer_id = response.headers.get("x-request-id", "")
                if REQUEST_ID_RE.match(answer_id) and not looks_like_secret(
                    answer_id, self._bearer
                ):
                    context["request_id"] = self.last_request_id = answer_id
                self.last_status = response.status_code
                await self._check_status(response, context)
                if message["method"] == "initialize":
                    self._take_session_id(response, context)
                if not expect_answer:
                    return None
                if response.status_code == 202:
                    raise MalformedResponse("no answer to a request", **context)
                _check_identity_encoding(response, context)
                kind = _content_type(response)
                if kind == "application/json":
                    payload = _parse_json(await _read_body(response), context)
                    return self._redacted_answer(payload, message["id"], context)
                if kind == "text/event-stream":
                    return await self._answer_from_stream(client, response, message["id"], context)
                raise MalformedResponse("unexpected content type", **context)

    def _redacted_answer(self, payload: object, rpc_id: int, context: dict) -> dict:
        """The answer with every echo of a secret taken out before anything reads it."""
        try:
            payload = redact_secrets(payload, known=(self._bearer,) if self._bearer else ())
        except TooDeeplyNested:
            raise MalformedResponse("the answer is nested too deeply", **context) from None
        return _answer_of(payload, rpc_id, context)

    async def _check_status(self, response: httpx.Response, context: dict) -> None:
        status = response.status_code
        context = {**context, "http_status": status}
        if 200 <= status < 300:
            return
        if 300 <= status < 400:
            raise RedirectRefused("redirect refused", **context)
        if status == 401:
            raise Unauthorized("401 unauthorized", **context)
        if status in (403, 421):
            if await _is_origin_refusal(response):
                raise OriginRefused("refused by the server's Origin/Host check", **context)
            if status == 403:
                raise Forbidden("403 forbidden", **context)
        if status == 404 and self.session_id is not None:
            raise SessionExpired("session ended by the server", **context)
        if status == 429:
            retry_after = response.headers.get("retry-after", "")
            seconds = int(retry_after) if retry_after.isdigit() and len(retry_after) < 9 else None
            raise RateLimited("429 too many requests", retry_after=seconds, **context)
        if status >= 500:
            raise ServerError(f"HTTP {status}", **context)
        raise HttpStatusError(f"HTTP {status}", **context)

    def _take_session_id(self, response: httpx.Response, context: dict) -> None:
        session_id = response.headers.get("mcp-session-id")
        if session_id is None:
            return
        if not SESSION_ID_RE.match(session_id):
            raise MalformedResponse("session id is not visible ASCII", **context)
        self.session_id = session_id

    async def _answer_from_stream(self, client, response, rpc_id: int, context: dict) -> dict:
        budget = ByteBudget(MAX_RESPONSE_BYTES)
        last_event_id, retry_ms = None, None
        for attempt in range(MAX_STREAM_RESUMPTIONS + 1):
            if attempt:
                if last_event_id is None:
                    break
                await anyio.sleep(min((retry_ms or 0) / 1000, MAX_RESUME_WAIT_SECONDS))
                response = await self._resume(client, last_event_id, context)
            try:
                async for event in _sse_events(response, budget, context):
                    if event.event_id is not None:
                        last_event_id = event.event_id
                    if event.retry_ms is not None:
                        retry_ms = event.retry_ms
                    if not event.data.strip():
                        continue  # a priming event or a keep-alive
                    payload = _parse_json(event.data.encode(), context)
                    if (
                        isinstance(payload, dict)
                        and payload.get("id") == rpc_id
                        and ("result" in payload or "error" in payload)
                    ):
                        return self._redacted_answer(payload, rpc_id, context)
                    # Notifications and server requests are not for this call: this client
                    # declares no capabilities that would let a server expect an answer.
            finally:
                if attempt:
                    await response.aclose()
        raise MalformedResponse("the stream ended without an answer", **context)

    async def _resume(self, client, last_event_id: str, context: dict) -> httpx.Response:
        headers, _ = self._headers()
        headers.pop("Content-Type")
        headers["Accept"] = "text/event-stream"
        headers["Last-Event-ID"] = last_event_id
        request = client.build_request("GET", self.url, headers=headers)
        response = await client.send(request, stream=True)
        try:
            await self._check_status(response, context)
            _check_identity_encoding(response, context)
            if _content_type(response) != "text/event-stream":
                raise MalformedResponse("resumption is not an event stream", **context)
        except BaseException:
            await response.aclose()
            raise
        return response


def _http_client(timeout: float) -> httpx.AsyncClient:
    return outbound_async_client(timeout=timeout, headers={"User-Agent": USER_AGENT})


def _content_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _check_identity_encoding(response: httpx.Response, context: dict) -> None:
    # We ask for identity; a compressed body would let a few bytes expand past the budget.
    encoding = response.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise MalformedResponse("the answer is compressed although identity was asked", **context)


async def _is_origin_refusal(response: httpx.Response) -> bool:
    """A 403/421 from Origin/Host protection: its body names Origin or Host and no scope error."""
    challenge = response.headers.get("www-authenticate", "").lower()
    if "insufficient_scope" in challenge:
        return False
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += chunk
        if len(body) >= MAX_ERROR_BODY_BYTES:
            break
    text = bytes(body[:MAX_ERROR_BODY_BYTES]).decode("utf-8", "replace").lower()
    if "insufficient_scope" in text:
        return False
    return bool(re.search(r"\b(origin|host)\b", text))


async def _read_body(response: httpx.Response) -> bytes:
    budget = ByteBudget(MAX_RESPONSE_BYTES)
    body = bytearray()
    async for chunk in response.aiter_raw():
        body += budget.take(chunk)
    return bytes(body)


def _parse_json(data: bytes, context: dict) -> object:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        # RecursionError: JSON nested deeper than the interpreter's stack allows.
        raise MalformedResponse("the answer is not JSON", **context) from None


_LINE_END = re.compile(rb"\r\n|\r|\n")


async def _sse_events(response: httpx.Response, budget: ByteBudget, context: dict):
    """Server-sent events as they arrive (WHATWG parsing: data/id/retry fields, blank line ends).

    Lines are cut from raw chunks here rather than by httpx, so the byte budget holds inside a
    line that never ends."""
    event, data_lines = _SseEvent(), []
    pending = b""

    def take(line: str):
        nonlocal event, data_lines
        if line == "":
            finished = None
            if data_lines or event.event_id is not None or event.retry_ms is not None:
                event.data = "\n".join(data_lines)
                finished = event
            event, data_lines = _SseEvent(), []
            return finished
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data_lines.append(value)
        elif name == "id" and "\0" not in value:
            event.event_id = value
        elif name == "retry" and value.isdigit() and len(value) < 9:
            event.retry_ms = int(value)
        return None

    async for chunk in response.aiter_raw():
        pending += budget.take(chunk)
        # A trailing "\r" may be the first half of "\r\n": hold it until the next chunk.
        held = b"\r" if pending.endswith(b"\r") else b""
        lines = _LINE_END.split(pending[: len(pending) - len(held)])
        pending = lines.pop() + held
        for raw in lines:
            finished = take(raw.decode("utf-8", "replace"))
            if finished is not None:
                yield finished
    if pending:
        take(pending.rstrip(b"\r").decode("utf-8", "replace"))
    if data_lines:
        event.data = "\n".join(data_lines)
        yield event


def _answer_of(payload: object, rpc_id: int, context: dict) -> dict:
    """The result of a JSON-RPC response to request `rpc_id`; JsonRpcError for an error."""
    if not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0":
        raise MalformedResponse("not a JSON-RPC 2.0 response", **context)
    if payload.get("id") != rpc_id:
        raise MalformedResponse("response to another request", **context)
    if "error" in payload:
        error = payload["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if not isinstance(code, int) or isinstance(code, bool):
            raise MalformedResponse("malformed JSON-RPC error", **context)
        raise JsonRpcError("the server returned a JSON-RPC error", error_code=code, **context)
    result = payload.get("result")
    if not isinstance(result, dict):
        raise MalformedResponse("JSON-RPC response without a result object", **context)
    return result


# --- the flow ------------------------------------------------------------------------------------


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


def discover_kb_tools(
    server,
    token: str | None,
    *,
    tool: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float | None = None,
    trust_first_use: bool = False,
    actor=None,
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
        definition=canonical_tool_definition(definition),
        definition_hash=tool_definition_hash(definition),
        pin_state=pin.state,
        request_id=request_id,
    )


def call_kb_select_ai(
    server,
    token: str | None,
    prompt: str,
    limit: int = DEFAULT_LIMIT,
    *,
    tool: str | None = None,
    environ: Mapping[str, str] | None = None,
    timeout: float | None = None,
    trust_first_use: bool = False,
    actor=None,
) -> CallResult:
    """The whole flow, then one tools/call with only `prompt` and the clamped `limit`.

    Arguments as for `discover_kb_tools`; `prompt` is a non-blank string of at most
    MCP_PROMPT_MAX_LENGTH characters (and the tool's maxLength), `limit` an integer clamped to
    1..100 (and the tool's own bounds). Before any request: token present and well-formed,
    tool allowlisted, server registered and enabled, prompt and limit valid. Before tools/call:
    the tool is listed, takes prompt/limit, and its definition matches its pin (else
    ToolDefinitionChanged: held until an admin approves). tools/call is never retried: after a
    timeout or an error, exactly one tools/call was sent. A tool's own failure is not an
    exception: `is_error` is set and `text` says what the tool said.
    """
    from django.conf import settings

    declaration, url, bearer, tool_name, seconds = _prepare(server, token, tool, environ, timeout)
    registered = _registered(declaration)
    if registered is None:
        raise ServerNotRegistered("tools are only called on registered servers")
    prompt = checked_prompt(prompt, max_length=settings.MCP_PROMPT_MAX_LENGTH)
    limit = clamp_limit(limit)
    from registry import pinning

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
    from registry.models import McpServer

    server = (
        McpServer.objects.filter(server_id=declaration.id).prefetch_related("allowed_tools").first()
    )
    if server is None or server.to_declaration() != declaration:
        return None
    return server


def _pin_check(server, tools, tool_name, trust_first_use, actor, request_id):
    """The pin state of `tool_name`, every listed tool checked against its pin."""
    from registry import pinning

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


# --- audit ---------------------------------------------------------------------------------------

_OUTCOMES = {
    "unauthorized": "unauthenticated",
    "missing_token": "unauthenticated",
    "malformed_token": "unauthenticated",
    "forbidden": "forbidden",
    "rate_limited": "rate_limited",
    "origin_refused": "refused_origin",
    "malformed_response": "malformed",
}


def audit_console_event(
    *,
    action: str,
    server_id: str,
    tool: str = "",
    token: str | None = None,
    stakeholder_id: str = "",
    stakeholder_role: str = "",
    actor: str = "",
    result: CallResult | Discovery | None = None,
    error: BaseException | None = None,
    refusal: str = "",
    prompt: str | None = None,
    latency_ms: float | None = None,
):
    """Record one console discovery or call ("console.discover" / "console.call") as an audit
    event: outcome, HTTP status, request id, server, tool, row count, the token's display
    prefix and keyed fingerprint (never the token), a keyed hash of the prompt (never its text).
    `refusal` names why nothing was sent (an unknown server, a bad preset file, …).
    """
    from audit.services import audit_record, prompt_fingerprint
    from registry.tokens import display_prefix, token_fingerprint

    values: dict = {
        "action": action[:64],
        "target": server_id[:128],
        "tool": (tool or "")[:128],
        "stakeholder_id": stakeholder_id[:16],
        "stakeholder_role": stakeholder_role[:32],
        "actor": actor[:150],
        "latency_ms": latency_ms,
    }
    if token:
        try:
            normalized = normalize_token(token)
        except MalformedToken:
            normalized = None
        if normalized is not None:
            values["token_prefix"] = display_prefix(normalized)
            values["token_fingerprint"] = token_fingerprint(normalized)
    if prompt is not None and isinstance(prompt, str):
        values["prompt_length"] = len(prompt)
        values["prompt_hash"] = prompt_fingerprint(prompt)
    if refusal:
        values["outcome"] = _OUTCOMES.get(refusal, "error")
        values["detail"] = refusal[:128]
    elif error is not None:
        public = to_public_mcp_error(error)
        values["outcome"] = _OUTCOMES.get(public.code, "error")
        values["http_status"] = public.http_status
        # An unexpected failure names its exception class (never its message) for diagnosis.
        values["detail"] = (
            public.code if public.code != "error" else f"error:{type(error).__name__}"
        )
        if isinstance(error, McpClientError):
            values["request_id"] = error.request_id[:64]
            values["rpc_method"] = error.rpc_method[:64]
    elif isinstance(result, CallResult):
        values["outcome"] = "tool_error" if result.is_error else "allowed"
        values["http_status"] = result.http_status
        values["request_id"] = result.request_id[:64]
        values["rpc_method"] = "tools/call"
        values["row_count"] = result.row_count
        values["tool"] = result.tool[:128]
    elif isinstance(result, Discovery):
        values["outcome"] = "allowed"
        values["http_status"] = 200
        values["request_id"] = result.request_id[:64]
        values["rpc_method"] = "tools/list"
        values["tool"] = result.tool[:128]
        values["detail"] = f"pin:{result.pin_state}"
    else:
        values["outcome"] = "error"
    return audit_record(**values)
