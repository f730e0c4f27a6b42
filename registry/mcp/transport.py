"""MCP over Streamable HTTP with one server: JSON-RPC requests, JSON or SSE answers, session ids,
version negotiation and stream resumption. No database, no settings: the caller passes the URL,
the bearer and the timeout.

A strict client on httpx, not the official SDK's: it never follows a redirect (an Authorization
header must never reach another origin) and it reports 401, 403 and 429 as themselves. The
bearer lives only in memory and only in the Authorization header.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio
import httpx
import mcp.types as mcp_types
from pydantic import ValidationError

from core.outbound import ByteBudget, ResponseTooLarge, outbound_async_client
from core.redaction import TooDeeplyNested, looks_like_secret, redact_secrets
from registry.mcp.errors import (
    ConnectionFailed,
    ErrorContext,
    Forbidden,
    HttpStatusError,
    JsonRpcError,
    MalformedResponse,
    McpClientError,
    McpTimeout,
    OriginRefused,
    ProtocolMismatch,
    RateLimited,
    RedirectRefused,
    ServerError,
    SessionExpired,
    Unauthorized,
)
from registry.tokens import normalize_token

REQUESTED_PROTOCOL_VERSION = "2025-11-25"
SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
CLIENT_INFO = {"name": "hyperbook", "title": "hyperbook MCP client", "version": "0.1.0"}

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
MAX_ERROR_BODY_BYTES = 4096
MAX_TOOL_PAGES = 20
MAX_STREAM_RESUMPTIONS = 3
MAX_RESUME_WAIT_SECONDS = 5.0
SESSION_ID_RE = re.compile(r"^[\x21-\x7e]{1,256}$")
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._-]{8,64}$")
USER_AGENT = "hyperbook-mcp-client/0.1"

# One message of the conversation as it went: "sent" (the JSON-RPC request or notification, never
# a header) or "received" (the HTTP status and the answer, secrets already redacted).
TranscriptRecorder = Callable[[dict], None]


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


def negotiated_version(result: Mapping) -> str:
    """The protocol version of an initialize result, if this client supports it."""
    version = result.get("protocolVersion")
    if not isinstance(version, str) or version not in SUPPORTED_PROTOCOL_VERSIONS:
        raise ProtocolMismatch(
            "unsupported protocol version", version=version if isinstance(version, str) else ""
        )
    return version


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
        exchange_id: str | None = None,
        recorder: TranscriptRecorder | None = None,
    ):
        """`exchange_id`: sent as the X-Request-ID of every HTTP request of this conversation, so
        the server's audit events of one exchange share it (else each request gets its own).
        `recorder`: called with each message sent and received, for a caller's transcript."""
        if exchange_id is not None and not REQUEST_ID_RE.match(exchange_id):
            raise ValueError("an exchange id is 8 to 64 letters, digits, '.', '_' or '-'")
        self.url = url
        self.exchange_id = exchange_id
        self._recorder = recorder
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
            context: ErrorContext = {
                "rpc_method": "tools/list",
                "request_id": self.last_request_id,
            }
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
        message: dict[str, object] = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = params
        answer = self._post(message, expect_answer=True)
        assert answer is not None  # a request is answered or raises
        return answer

    def notify(self, method: str, params: dict | None = None) -> None:
        message: dict[str, object] = {"jsonrpc": "2.0", "method": method}
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
        """Headers for the next HTTP request, with its X-Request-ID (also returned): the exchange's
        id, or a fresh one."""
        headers = mcp_headers(self._bearer, self.protocol_version, self.session_id)
        headers["Accept-Encoding"] = "identity"  # the byte budget counts what the server sent
        request_id = self.exchange_id or uuid.uuid4().hex
        headers["X-Request-ID"] = request_id
        return headers, request_id

    def _post(self, message: dict, *, expect_answer: bool) -> dict | None:
        """One POST. `last_request_id` ends as its X-Request-ID (the server's echo if valid)."""
        method = message["method"]
        headers, request_id = self._headers()
        self.last_request_id, self.last_status = request_id, None
        body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
        context = {"rpc_method": method, "request_id": request_id}
        self._record({"direction": "sent", "method": method, "message": message})
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
                if not (expect_answer and 200 <= response.status_code < 300):
                    # A request's 2xx answer is recorded with its body once read and redacted
                    # (_redacted_answer); a notification's or a refusal's status only, here.
                    self._record(
                        {
                            "direction": "received",
                            "method": message["method"],
                            "http_status": response.status_code,
                        }
                    )
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
        self._record(
            {
                "direction": "received",
                "method": context.get("rpc_method", ""),
                "http_status": self.last_status,
                "message": payload,
            }
        )
        return _answer_of(payload, rpc_id, context)

    def _record(self, entry: dict) -> None:
        if self._recorder is not None:
            self._recorder(entry)

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
                    answer = _response_message(payload)
                    if answer is not None and answer.id == rpc_id:
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
    line that never ends. Not the SDK's SSE (httpx2.EventSource): it reads httpx2 responses as
    decoded text and bounds each event, not the request's bytes across events and comments."""
    event = _SseEvent()
    data_lines: list[str] = []
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


def _response_message(payload: object) -> mcp_types.JSONRPCResponse | mcp_types.JSONRPCError | None:
    """The payload as a JSON-RPC response or error (the SDK's types, strictly), else None."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_python(payload, strict=True)
    except ValidationError:
        return None
    if isinstance(message, mcp_types.JSONRPCResponse | mcp_types.JSONRPCError):
        return message
    return None


def _answer_of(payload: object, rpc_id: int, context: dict) -> dict:
    """The result of a JSON-RPC response to request `rpc_id`; JsonRpcError for an error."""
    message = _response_message(payload)
    if message is None:
        raise MalformedResponse("not a JSON-RPC 2.0 response", **context)
    if message.id != rpc_id:
        raise MalformedResponse("response to another request", **context)
    if isinstance(message, mcp_types.JSONRPCError):
        raise JsonRpcError(
            "the server returned a JSON-RPC error", error_code=message.error.code, **context
        )
    return message.result
