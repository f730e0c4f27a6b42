"""Why a discovery or a call failed, and what a user may be told about it (in their language).

Messages are ours, never a server's text, a URL or a token. Importable without Django settings:
the transport raises these, and the conformance client runs the transport on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TypedDict

import httpx
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

from registry.declarations import EndpointError
from registry.tokens import MalformedToken

SAFE_VERSION_RE = re.compile(r"^[A-Za-z0-9._-]{1,32}$")


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


class ErrorContext(TypedDict, total=False):
    """Where an error happened, as McpClientError takes it (`**context`)."""

    rpc_method: str
    request_id: str


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


@dataclass(frozen=True)
class PublicMcpError:
    """What a user may be shown about a failure. `retryable`: the user may try again (by hand;
    nothing is ever retried automatically)."""

    code: str
    message: str
    http_status: int | None = None
    retryable: bool = False


GENERAL_MESSAGE = _("MCP 서버와 통신하는 중 오류가 발생했습니다.")
PUBLIC_MESSAGES: dict[str, tuple[Promise, bool]] = {
    "missing_token": (_("VPD 토큰을 선택하거나 입력하세요. 요청을 보내지 않았습니다."), False),
    "malformed_token": (_("토큰 형식이 올바르지 않습니다. 요청을 보내지 않았습니다."), False),
    "unauthorized": (_("토큰이 유효하지 않거나 만료됨"), False),
    "forbidden": (_("이 사용자에게 조회 권한 없음"), False),
    "rate_limited": (_("잠시 후 다시 시도하세요"), True),
    "timeout": (_("MCP 서버 응답 시간이 초과되었습니다. 잠시 후 다시 시도하세요."), True),
    "redirect_refused": (
        _("MCP 서버가 다른 주소로 이동하라고 응답해 요청을 중단했습니다."),
        False,
    ),
    # The contract: a wrong Origin is shown as a general error.
    "origin_refused": (GENERAL_MESSAGE, False),
    "malformed_response": (_("MCP 서버의 응답 형식이 올바르지 않습니다."), False),
    "protocol_mismatch": (_("MCP 서버의 프로토콜 버전을 지원하지 않습니다."), False),
    "connection_failed": (_("MCP 서버에 연결할 수 없습니다. 잠시 후 다시 시도하세요."), True),
    "tool_not_allowed": (_("허용되지 않은 도구입니다. 요청을 보내지 않았습니다."), False),
    "tool_not_offered": (_("MCP 서버가 허용된 도구를 제공하지 않습니다."), False),
    "tool_contract_mismatch": (_("MCP 서버 도구의 입력 형식이 계약과 다릅니다."), False),
    "tool_held": (
        _("도구 정의가 변경되어 관리자가 승인할 때까지 호출이 보류되었습니다."),
        False,
    ),
    "invalid_arguments": (_("질문 또는 조회 건수가 올바르지 않습니다."), False),
    "endpoint_unavailable": (_("MCP 서버 주소가 설정되지 않았거나 올바르지 않습니다."), False),
    "bearer_refused": (
        _("사용자 VPD 토큰은 KB VPD 서버에만 보낼 수 있습니다. 요청을 보내지 않았습니다."),
        False,
    ),
    "server_disabled": (_("사용하지 않도록 설정된 MCP 서버입니다."), False),
    "server_not_registered": (_("등록된 MCP 서버가 아닙니다."), False),
    "session_expired": (_("MCP 세션이 만료되었습니다. 다시 시도하세요."), True),
    "server_error": (_("MCP 서버 오류가 발생했습니다. 잠시 후 다시 시도하세요."), True),
    "rpc_error": (_("MCP 서버가 요청을 처리하지 못했습니다."), False),
    "http_error": (GENERAL_MESSAGE, False),
    "error": (GENERAL_MESSAGE, False),
}


def to_public_mcp_error(exc: BaseException) -> PublicMcpError:
    """A safe message for any failure, in the active language: no server text, URL or token."""
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
    return PublicMcpError(code=code, message=str(message), http_status=status, retryable=retryable)
