"""The checks in front of the MCP SDK: Host, Origin, bearer, permission, rate limit, body shape.

Runs at the ASGI layer (not through Django's middleware stack, which costs ~2 ms a request) and
answers refusals itself, so no tool code runs for a request that fails any check.
"""

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from django.conf import settings
from django.utils import translation
from django.utils.translation import gettext_noop
from django.utils.translation.trans_real import parse_accept_lang_header
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from uuid_utils.compat import uuid7

from audit.models import AuditEvent
from audit.services import prompt_fingerprint
from core import tracing
from core.redaction import redact_secrets
from kb.policy import query_refusal
from mcpserver import metrics, receipts
from mcpserver.http import host_allowed, json_reply, own_url, request_headers, rpc_error
from mcpserver.principals import Authentication, Principal, authenticate_token
from mcpserver.ratelimit import RateLimits
from mcpserver.records import (
    ACTIONS,
    RequestRecord,
    client_request_id,
    client_text,
    secrets_sent,
)
from mcpserver.threads import in_db_thread
from registry.declarations import TOOL_NAME_RE
from registry.tokens import MalformedToken, bearer_from_header

if TYPE_CHECKING:
    from mcpserver.auditing import RequestAuditor

logger = logging.getLogger("hyperbook.mcp")

# No MCP message needs more nesting than this; deeper bodies are refused before anything walks them.
MAX_JSON_DEPTH = 32
# JSON-RPC leaves -32000 to -32099 to the server; MCP names none of them for "slow down".
RATE_LIMITED = -32000


Outcome = AuditEvent.Outcome
Reason = AuditEvent.Reason

# What authenticate_token says is wrong with a token it could not resolve.
_AUTHENTICATION_FAILURES = {
    reason.value: reason
    for reason in (
        Reason.UNKNOWN_TOKEN,
        Reason.EXPIRED_TOKEN,
        Reason.REVOKED_TOKEN,
        Reason.WRONG_AUDIENCE,
    )
}

_authenticate = in_db_thread(authenticate_token)


class McpGate:
    def __init__(
        self,
        app,
        *,
        allowed_hosts: list[str],
        allowed_origins: list[str],
        resource_url: str,
        authorization_servers: list[str],
        max_body_bytes: int,
        rate_limits: RateLimits,
        auditor: "RequestAuditor | None" = None,
    ):
        self.app = app
        self.allowed_hosts = {h.lower() for h in allowed_hosts}
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins}
        self.resource_url = resource_url
        self.authorization_servers = authorization_servers
        self.max_body_bytes = max_body_bytes
        self.rate_limits = rate_limits
        self.auditor = auditor

    async def __call__(self, scope, receive, send) -> None:
        headers = request_headers(scope)
        # Whatever the client sends beside its bearer is kept only in a safe shape: never the
        # bearer itself, nor anything else shaped like a secret.
        known = secrets_sent(headers.get("authorization"))
        origin = headers.get("origin")
        record = RequestRecord(
            # Always our own, unique and time-ordered (the audit's request-id index grows at the
            # end); what the client called it is kept beside it and echoed back.
            request_id=uuid7().hex,
            client_request_id=client_request_id(headers.get("x-request-id", ""), known=known),
            started=time.perf_counter(),
            client=(scope.get("client") or ("", 0))[0],
            origin=None if origin is None else client_text(origin, known=known),
            user_agent=client_text(headers.get("user-agent", ""), known=known),
            http_method=scope["method"],
        )

        held: list[dict] = []
        finished = False

        async def send_when_recorded(message):
            # The response is held until its audit event is committed: no answer leaves unrecorded.
            nonlocal finished
            if message["type"] == "http.response.start":
                record.status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (b"x-request-id", record.request_id.encode()),
                ]
                if record.client_request_id:
                    message["headers"].append(
                        (b"x-client-request-id", record.client_request_id.encode())
                    )
            held.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
                if await self._finish(record):
                    if (
                        record.appended is not None
                        and record.action == AuditEvent.Action.MCP_TOOLS_CALL
                    ):
                        receipts.with_receipt(held, record.appended, self_url=record.self_url)
                    for held_message in held:
                        await send(held_message)
                else:
                    await json_reply(
                        send, 503, rpc_error(INTERNAL_ERROR, "audit unavailable; not answered")
                    )

        tracing.request_started(record.request_id)
        try:
            with tracing.request_span(
                "mcp.gate",
                {"http.method": _traced_method(record.http_method)},
                client_traceparent=headers.get("traceparent", ""),
            ):
                await self._handle(scope, receive, send_when_recorded, headers, record, known)
        except Exception:
            # A request never crashes the worker or leaks a traceback; the id ties logs together.
            logger.exception("mcp request failed request_id=%s", record.request_id)
            if not finished:
                held.clear()
                record.outcome, record.reason = Outcome.ERROR, Reason.EXCEPTION
                await json_reply(
                    send_when_recorded, 500, rpc_error(INTERNAL_ERROR, "internal error")
                )

    async def _finish(self, record: RequestRecord) -> bool:
        record.latency_ms = (time.perf_counter() - record.started) * 1000
        if record.outcome is None:
            record.outcome = Outcome.ALLOWED if record.status < 400 else Outcome.ERROR
        _log(record)
        try:
            metrics.request_counted(record)
        except Exception:  # a count that cannot be kept (e.g. a full disk) never costs an answer
            logger.exception("mcp metrics failed request_id=%s", record.request_id)
        if self.auditor is None:
            return True
        try:
            record.appended = await self.auditor.completed(record)
        except Exception:
            logger.exception("mcp audit write failed request_id=%s", record.request_id)
            return False
        return True

    async def _handle(self, scope, receive, send, headers, record: RequestRecord, known):
        request = _Request(
            scope=scope, receive=receive, headers=headers, record=record, known=known
        )
        receipt = scope["method"] == "GET" and receipts.is_receipt_path(scope.get("path", ""))
        for check in self.receipt_checks if receipt else self.checks:
            refusal = await check(self, request)
            if refusal is not None:
                return await _apply(send, record, refusal)
        if receipt:
            return await receipts.serve_receipt(
                request.scope, _with_headers(send, request.cors), request.authenticated, record
            )
        scope = {
            **scope,
            "state": {
                **scope.get("state", {}),
                "principal": request.principal,
                "record": record,
                "message": request.message,
            },
        }
        await self.app(
            scope, _replay(request.body, request.receive), _with_headers(send, request.cors)
        )

    # --- the checks, in the order of the README's table ---------------------------------------

    async def _host_allowed(self, request: "_Request") -> "Refusal | None":
        if host_allowed(request.headers.get("host", ""), self.allowed_hosts):
            return None
        return Refusal(
            403, Outcome.REFUSED_HOST, Reason.HOST, body=rpc_error(INVALID_REQUEST, HOST_REFUSED)
        )

    async def _origin_allowed(self, request: "_Request") -> "Refusal | None":
        origin = request.headers.get("origin")
        if origin is not None and not self._origin_known(origin, request.headers.get("host", "")):
            return Refusal(
                403,
                Outcome.REFUSED_ORIGIN,
                Reason.ORIGIN,
                body=rpc_error(INVALID_REQUEST, ORIGIN_REFUSED),
            )
        request.cors = _cors_headers(origin)
        return None

    async def _post_or_preflight(self, request: "_Request") -> "Refusal | None":
        method = request.scope["method"]
        if method == "OPTIONS" and request.headers.get("origin") is not None:
            # A preflight is answered here, allowed: nothing behind the gate has one to answer.
            request.record.action = AuditEvent.Action.MCP_PREFLIGHT
            return Refusal(204, Outcome.ALLOWED, None, (*request.cors, *_PREFLIGHT_HEADERS))
        if receipts.is_receipt_path(request.scope.get("path", "")):
            request.record.action = AuditEvent.Action.MCP_RECEIPT
            if method == "GET":
                return None
            return Refusal(
                405,
                Outcome.MALFORMED,
                Reason.METHOD,
                ((b"allow", b"GET, OPTIONS"), *request.cors),
                rpc_error(INVALID_REQUEST, "Method not allowed: a receipt is read with GET"),
            )
        if method == "POST":
            return None
        if method in _PROBES:
            # What the spec lets a client try and a server decline with 405: recorded as such, not
            # as a malformed request (the official clients send both as a matter of course).
            request.record.action = _PROBES[method]
            return Refusal(
                405,
                Outcome.NOT_OFFERED,
                None,
                ((b"allow", b"POST, OPTIONS"), *request.cors),
                rpc_error(
                    INVALID_REQUEST, "Method not allowed: this server is stateless; use POST"
                ),
            )
        return Refusal(
            405,
            Outcome.MALFORMED,
            Reason.METHOD,
            ((b"allow", b"POST, OPTIONS"), *request.cors),
            rpc_error(INVALID_REQUEST, "Method not allowed: this server is stateless; use POST"),
        )

    async def _bearer_authenticated(self, request: "_Request") -> "Refusal | None":
        request.self_url = request.record.self_url = self.resource_url or own_url(
            {**request.scope, "path": "/mcp"}, request.headers
        )
        authorization = request.headers.get("authorization")
        try:
            token = bearer_from_header(authorization)
        except MalformedToken:
            reason = Reason.MISSING_TOKEN if authorization is None else Reason.MALFORMED_TOKEN
            return await self._failed_authentication(request, reason)
        authentication: Authentication = await _authenticate(token)
        del token
        if authentication.principal is None:
            # A failure authenticate_token may learn to report is still a refusal, never a 500.
            reason = _AUTHENTICATION_FAILURES.get(authentication.failure, Reason.UNKNOWN_TOKEN)
            return await self._failed_authentication(request, reason)
        request.principal = request.record.principal = authentication.principal
        return None

    async def _delegation_within_rate(self, request: "_Request") -> "Refusal | None":
        # The bearer is known: its delegation's limit comes before anything else is read.
        retry_after = await self.rate_limits.delegation_retry_after(
            request.authenticated.delegation_id
        )
        return _rate_limited(retry_after, Reason.RATE_LIMITED, request) if retry_after else None

    async def _stakeholder_permitted(self, request: "_Request") -> "Refusal | None":
        if request.authenticated.permitted:
            return None
        return _not_permitted(request)

    async def _json_content_type(self, request: "_Request") -> "Refusal | None":
        if _is_json(request.headers.get("content-type", "")):
            return None
        return Refusal(
            415,
            Outcome.MALFORMED,
            Reason.CONTENT_TYPE,
            tuple(request.cors),
            rpc_error(INVALID_REQUEST, "Content-Type must be application/json"),
        )

    async def _body_within_limit(self, request: "_Request") -> "Refusal | None":
        body = await _read_body(request.receive, self.max_body_bytes)
        if body is not None:
            request.body = body
            return None
        return Refusal(
            413,
            Outcome.TOO_LARGE,
            Reason.TOO_LARGE,
            tuple(request.cors),
            rpc_error(INVALID_REQUEST, "Request body too large"),
        )

    async def _one_json_rpc_message(self, request: "_Request") -> "Refusal | None":
        message, problem = parse_message(request.body)
        if message is None:
            code = PARSE_ERROR if problem == "Parse error" else INVALID_REQUEST
            return Refusal(
                400,
                Outcome.MALFORMED,
                Reason.MALFORMED,
                tuple(request.cors),
                rpc_error(code, problem),
            )
        request.message = message
        record = request.record
        method: str = message["method"] if isinstance(message.get("method"), str) else ""
        record.action = ACTIONS.get(method, AuditEvent.Action.MCP_REQUEST)
        record.rpc_method = method if method in ACTIONS else ""
        return None

    async def _tool_delegated(self, request: "_Request") -> "Refusal | None":
        message, record = request.parsed, request.record
        if message.get("method") != "tools/call":
            return None
        params: dict = message["params"] if isinstance(message.get("params"), dict) else {}
        tool = params.get("name")
        known = request.known
        record.tool = redact_secrets(tool, known=known)[:128] if isinstance(tool, str) else ""
        if record.tool not in request.authenticated.tools:
            return _forbidden(request, Reason.TOOL_NOT_DELEGATED, needed=record.tool)
        arguments = params.get("arguments")
        if isinstance(arguments, dict) and isinstance(arguments.get("prompt"), str):
            record.prompt_length = len(arguments["prompt"])
            record.prompt_hash = prompt_fingerprint(arguments["prompt"])
        return None

    checks = (
        _host_allowed,
        _origin_allowed,
        _post_or_preflight,
        _bearer_authenticated,
        _delegation_within_rate,
        _stakeholder_permitted,
        _json_content_type,
        _body_within_limit,
        _one_json_rpc_message,
        _tool_delegated,
    )
    # A receipt (GET /mcp/receipts/<event id>) has no body: it is the caller's own, and nothing of
    # it is parsed.
    receipt_checks = checks[: checks.index(_stakeholder_permitted) + 1]

    async def _failed_authentication(self, request: "_Request", reason) -> "Refusal":
        """401, or 429 once this address has failed too often: a failure counts against its
        address, and only failures are refused for it (a valid bearer from the same address,
        behind the same NAT or proxy, is never locked out by others' mistakes)."""
        retry_after = await self.rate_limits.failed_authentication_retry_after(
            request.record.client or "unknown"
        )
        if retry_after:
            return _rate_limited(retry_after, Reason.AUTH_RATE_LIMITED, request)
        return _unauthorized(request, reason)

    def _origin_known(self, origin: str, host: str) -> bool:
        origin = origin.rstrip("/").lower()
        # Same-origin pages are safe: the Host header has already passed the allowlist, so this
        # cannot be a rebinding of a foreign name onto our address.
        same_origin = origin in (f"http://{host.lower()}", f"https://{host.lower()}")
        return same_origin or origin in self.allowed_origins


@dataclass(frozen=True)
class Refusal:
    """How the gate answers a request it does not pass on: the reply, and what the audit event
    records. (A CORS preflight is answered this way too, recorded as allowed.)"""

    status: int
    outcome: AuditEvent.Outcome
    reason: AuditEvent.Reason | None
    headers: tuple[tuple[bytes, bytes], ...] = ()
    body: dict | None = None


@dataclass
class _Request:
    """One request as the checks see it, and what they learn of it on the way."""

    scope: dict
    receive: object
    headers: dict[str, str]
    record: RequestRecord
    known: tuple[str, ...]
    cors: list = field(default_factory=list)
    self_url: str = ""
    principal: Principal | None = None
    body: bytes = b""
    message: dict | None = None

    # The checks run in order: those after authentication (or parsing) read what it set.
    @property
    def authenticated(self) -> Principal:
        assert self.principal is not None, "read before the bearer was authenticated"
        return self.principal

    @property
    def parsed(self) -> dict:
        assert self.message is not None, "read before the body was parsed"
        return self.message


async def _apply(send, record: RequestRecord, refusal: Refusal) -> None:
    """The one place a refusal reaches the record and the reply."""
    record.outcome, record.reason = refusal.outcome, refusal.reason
    await json_reply(send, refusal.status, refusal.body, refusal.headers)


# What a refused client is told: what happened and what to do, as the JSON-RPC error's message
# (SDK clients show it) beside WWW-Authenticate's shorter error_description.
# MCP Streamable HTTP: GET opens a server-sent stream, DELETE ends a session; a stateless server
# offers neither and answers 405.
_PROBES = {"GET": AuditEvent.Action.MCP_STREAM_OPEN, "DELETE": AuditEvent.Action.MCP_SESSION_END}

HOST_REFUSED = (
    "Host not allowed: this server answers only the host names in its MCP_ALLOWED_HOSTS "
    "setting; if this name should reach it, its operator adds the name there."
)
ORIGIN_REFUSED = (
    "Origin not allowed: browsers may call this server only from its own origin or one in its "
    "MCP_ALLOWED_ORIGINS setting; if this page should reach it, its operator adds the origin there."
)
# 401s: what went wrong with the token (WWW-Authenticate's error_description), and what to do
# (the JSON-RPC message). Both say the agent may sign in as its user: the authorization server is
# the one the resource metadata names ({metadata} is its URL), and MCP clients follow it from the
# 401 on their own; a pasted VPD token is the other way in.
_AUTHENTICATION_ADVICE = {
    Reason.MISSING_TOKEN: (
        "A bearer token is required: sign in through the authorization server in {metadata}",
        "Authentication required: sign in as your user through the authorization server that "
        "this server's resource metadata names ({metadata}), or send the VPD delegation token "
        "issued to this agent as 'Authorization: Bearer <token>'. An operator issues one in "
        "hyperbook's admin.",
    ),
    Reason.MALFORMED_TOKEN: (
        "The Authorization header is not a bearer token",
        "The Authorization header is not a usable bearer token: send "
        "'Authorization: Bearer <token>' with the token exactly as it was issued, or sign in "
        "through the authorization server that {metadata} names.",
    ),
    Reason.UNKNOWN_TOKEN: (
        "The token is not known: sign in again",
        "The bearer token is not known to this server: sign in again through the authorization "
        "server that {metadata} names, check that a pasted token was copied in full, or ask an "
        "operator for a new delegation token.",
    ),
    Reason.EXPIRED_TOKEN: (
        "The token has expired: sign in again",
        "The bearer token has expired: sign in again through the authorization server that "
        "{metadata} names, or ask an operator to renew the delegation and use the new token.",
    ),
    Reason.REVOKED_TOKEN: (
        "The token was revoked: sign in again",
        "The bearer token was revoked: sign in again through the authorization server that "
        "{metadata} names, or ask an operator for a new delegation token.",
    ),
    Reason.WRONG_AUDIENCE: (
        "The token was issued for another resource: sign in for this one",
        "The bearer token was issued for another MCP server: sign in through the authorization "
        "server that {metadata} names for a token for this one.",
    ),
}
# A suspended user: no token, scope or sign-in can help, only an operator. Korean first (the
# JSON-RPC message follows the request's Accept-Language, else the server's language); the
# challenge's error_description is always the English text (RFC 6750 §3 allows ASCII only).
SUSPENDED = (
    gettext_noop("정지된 사용자: 운영자에게 문의하세요"),
    gettext_noop(
        "정지된 사용자: 운영자에게 문의하세요. 운영자가 이 사용자를 다시 활성화하기 전에는 "
        "지식베이스를 조회할 수 없으며, 다시 로그인하거나 권한을 더 요청해도 달라지지 않습니다."
    ),
)
_FORBIDDEN_ADVICE = {
    Reason.STAKEHOLDER_NOT_PERMITTED: (
        "This user may not query the knowledge base: ask an operator",
        "Forbidden: the token is valid, but its user may not query the knowledge base (a role "
        "without access, or a branch manager without a branch). An operator can check the user "
        "on hyperbook's access page.",
    ),
    Reason.TOOL_NOT_DELEGATED: (
        "This tool is not delegated to the token",
        "Forbidden: this tool is not among the token's delegated tools. Call tools/list for the "
        "tools it may use, or ask an operator to delegate this one.",
    ),
}
# JSON-RPC leaves -32000 to -32099 to the server: these follow the HTTP status they go with.
UNAUTHORIZED, FORBIDDEN = -32001, -32003


def _request_id(request: "_Request"):
    """The JSON-RPC id of the request, once its body was parsed (null before)."""
    message = request.message or {}
    request_id = message.get("id")
    return (
        request_id
        if isinstance(request_id, str | int) and not isinstance(request_id, bool)
        else None
    )


def _unauthorized(request: "_Request", reason) -> Refusal:
    description, message = _AUTHENTICATION_ADVICE.get(
        reason, _AUTHENTICATION_ADVICE[Reason.UNKNOWN_TOKEN]
    )
    metadata_url = protected_resource_metadata_url(request.self_url)
    description = description.format(metadata=metadata_url)
    sent = reason is not Reason.MISSING_TOKEN
    challenge = f'Bearer realm="hyperbook", resource_metadata="{metadata_url}"'
    if sent:
        # RFC 6750 §3.1: a request without credentials gets no error code in the challenge.
        challenge += f', error="invalid_token", error_description="{description}"'
    error = "invalid_token" if sent else "unauthorized"
    body = rpc_error(UNAUTHORIZED, message.format(metadata=metadata_url), _request_id(request))
    body["error"]["data"] = {"error": error, "error_description": description}
    return Refusal(
        401,
        Outcome.UNAUTHENTICATED,
        reason,
        ((b"www-authenticate", challenge.encode()), *request.cors),
        body,
    )


def _forbidden(request: "_Request", reason, *, needed: str = "") -> Refusal:
    """403 for a tool the grant lacks: `needed` is the tool the call asked for, and RFC 6750's
    scope= names it (our scopes are the tools' names), so a signing-in client can ask for it."""
    description, message = _FORBIDDEN_ADVICE[reason]
    challenge = (
        f'Bearer realm="hyperbook", error="insufficient_scope", '
        f'error_description="{description}", '
        f'resource_metadata="{protected_resource_metadata_url(request.self_url)}"'
    )
    if needed and TOOL_NAME_RE.match(needed):
        challenge += f', scope="{needed}"'
    body = rpc_error(FORBIDDEN, message, _request_id(request))
    body["error"]["data"] = {"error": "insufficient_scope", "error_description": description}
    return _forbidden_refusal(request, reason, challenge, body)


def _not_permitted(request: "_Request") -> Refusal:
    """403 for a user who may not query at all (suspended, or a role without access). Not
    insufficient_scope: no scope would help, and clients that step up scopes on that error would
    send the user through sign-in again for nothing. access_denied says it is the user's."""
    asker = request.authenticated.asker
    refusal = query_refusal(role=asker.role, status=asker.status, branch_id=asker.branch_id)
    if refusal is not None and refusal.reason == "suspended":
        description = _english(SUSPENDED[0])
        with translation.override(_language(request.headers)):
            message = translation.gettext(SUSPENDED[1])
    else:
        description, message = _FORBIDDEN_ADVICE[Reason.STAKEHOLDER_NOT_PERMITTED]
    challenge = (
        f'Bearer realm="hyperbook", error="access_denied", error_description="{description}", '
        f'resource_metadata="{protected_resource_metadata_url(request.self_url)}"'
    )
    body = rpc_error(FORBIDDEN, message, _request_id(request))
    body["error"]["data"] = {"error": "access_denied", "error_description": description}
    return _forbidden_refusal(request, Reason.STAKEHOLDER_NOT_PERMITTED, challenge, body)


def _forbidden_refusal(request: "_Request", reason, challenge: str, body: dict) -> Refusal:
    return Refusal(
        403,
        Outcome.FORBIDDEN,
        reason,
        ((b"www-authenticate", challenge.encode()), *request.cors),
        body,
    )


def _rate_limited(retry_after: int, reason, request: "_Request") -> Refusal:
    """429 with how long to wait, in Retry-After (seconds) and in the message the client shows."""
    if reason is Reason.AUTH_RATE_LIMITED:
        message = (
            f"Too many failed authentications from this address: wait {retry_after} seconds "
            "(Retry-After) before trying again, with a valid token or after signing in."
        )
    else:
        message = (
            f"Too many requests for this delegation: wait {retry_after} seconds (Retry-After) "
            "before sending the next one."
        )
    body = rpc_error(RATE_LIMITED, message, _request_id(request))
    body["error"]["data"] = {"retry_after": retry_after}
    return Refusal(
        429,
        Outcome.RATE_LIMITED,
        reason,
        ((b"retry-after", str(retry_after).encode()), *request.cors),
        body,
    )


def _language(headers: dict[str, str]) -> str:
    """The first language of the request's Accept-Language that hyperbook speaks, else the
    server's. (LocaleMiddleware's rule; the gate runs before Django's middleware.)"""
    for code, _quality in parse_accept_lang_header(headers.get("accept-language", "")[:255]):
        if code == "*":
            break
        try:
            return translation.get_supported_language_variant(code)
        except LookupError:
            continue
    return settings.LANGUAGE_CODE


def _english(message: str) -> str:
    with translation.override("en"):
        return translation.gettext(message)


def parse_message(body: bytes) -> tuple[dict | None, str]:
    """(the JSON-RPC message, "") or (None, what is wrong with it) for a 400.

    Beyond JSON: one object (no batches), nested at most MAX_JSON_DEPTH deep, and only text that
    is valid Unicode (a lone surrogate escape such as "\\ud800" is JSON, but not text anything
    downstream can encode)."""
    try:
        message = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None, "Parse error"
    if not isinstance(message, dict):
        return None, "Batches and non-object messages are not supported"
    stack: list[tuple[dict | list, int]] = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            return None, "Message nested too deeply"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and not _encodable(key):
                return None, "Message text is not valid Unicode"
            if isinstance(item, str):
                if not _encodable(item):
                    return None, "Message text is not valid Unicode"
            elif isinstance(item, dict | list):
                stack.append((item, depth + 1))
    return message, ""


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def protected_resource_metadata_url(resource_url: str) -> str:
    """RFC 9728 §3.1: the well-known path is inserted between the host and the resource's path."""
    scheme, rest = resource_url.split("://", 1)
    host, _, path = rest.partition("/")
    suffix = f"/{path}" if path else ""
    return f"{scheme}://{host}/.well-known/oauth-protected-resource{suffix}"


_PREFLIGHT_HEADERS = [
    (b"access-control-allow-methods", b"POST, OPTIONS"),
    (
        b"access-control-allow-headers",
        b"authorization, content-type, accept, mcp-protocol-version, mcp-session-id, x-request-id",
    ),
    (b"access-control-max-age", b"600"),
]


def _cors_headers(origin: str | None) -> list[tuple[bytes, bytes]]:
    # Only called once the Origin has been checked against the allowlist.
    if origin is None:
        return []
    return [
        (b"access-control-allow-origin", origin.encode("latin-1", "replace")),
        (b"access-control-expose-headers", b"mcp-session-id, x-request-id, www-authenticate"),
        (b"vary", b"origin"),
    ]


def _is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


async def _read_body(receive, limit: int) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive_more):
    """The body the gate has read, then the client's own `receive`: what follows the body is the
    client's disconnect, when it happens. (Answering "disconnected" at once makes the SDK cancel a
    handler that watches for it, as on its `subscriptions/listen` path, and no response is sent.)"""
    sent = False

    async def receive():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive_more()

    return receive


def _with_headers(send, extra):
    if not extra:
        return send

    async def wrapped(message):
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), *extra]
        await send(message)

    return wrapped


def _traced_method(method: str) -> str:
    # Any token is a valid HTTP method: one of the client's invention is not kept (OTel's "_OTHER").
    return method if method in _HTTP_METHODS else "_OTHER"


_HTTP_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"))


def _log(record: RequestRecord) -> None:
    principal = record.principal
    logger.info(
        "mcp request_id=%s status=%s outcome=%s reason=%s rpc=%s tool=%s stakeholder=%s "
        "delegation=%s client=%s latency_ms=%.1f rows=%s",
        record.request_id,
        record.status,
        record.outcome,
        record.reason or "-",
        record.rpc_method or "-",
        record.tool or "-",
        principal.stakeholder_id if principal else "-",
        principal.delegation_id if principal else "-",
        record.client or "-",
        record.latency_ms,
        "-" if record.row_count is None else record.row_count,
    )
