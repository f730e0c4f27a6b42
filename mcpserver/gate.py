"""The checks in front of the MCP SDK: Host, Origin, bearer, permission, rate limit, body shape.

Runs at the ASGI layer (not through Django's middleware stack, which costs ~2 ms a request) and
answers refusals itself, so no tool code runs for a request that fails any check.
"""

import json
import logging
import time
from typing import TYPE_CHECKING

from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, PARSE_ERROR
from uuid_utils.compat import uuid7

from audit.models import AuditEvent
from audit.services import prompt_fingerprint
from core import tracing
from core.redaction import redact_secrets
from mcpserver import metrics
from mcpserver.http import host_allowed, json_reply, own_url, request_headers, rpc_error
from mcpserver.principals import Authentication, authenticate_token
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

    async def __call__(self, scope, receive, send):
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
            await self.auditor.completed(record)
        except Exception:
            logger.exception("mcp audit write failed request_id=%s", record.request_id)
            return False
        return True

    async def _handle(self, scope, receive, send, headers, record: RequestRecord, known):
        if not host_allowed(headers.get("host", ""), self.allowed_hosts):
            return await self._refuse(
                send,
                record,
                403,
                Outcome.REFUSED_HOST,
                Reason.HOST,
                rpc_error(INVALID_REQUEST, "Host not allowed"),
            )
        origin = headers.get("origin")
        if origin is not None and not self._origin_allowed(origin, headers.get("host", "")):
            return await self._refuse(
                send,
                record,
                403,
                Outcome.REFUSED_ORIGIN,
                Reason.ORIGIN,
                rpc_error(INVALID_REQUEST, "Origin not allowed"),
            )
        cors = _cors_headers(origin)
        if scope["method"] == "OPTIONS" and origin is not None:
            record.action, record.outcome = AuditEvent.Action.MCP_PREFLIGHT, Outcome.ALLOWED
            return await json_reply(send, 204, None, cors + _PREFLIGHT_HEADERS)
        if scope["method"] != "POST":
            return await self._refuse(
                send,
                record,
                405,
                Outcome.MALFORMED,
                Reason.METHOD,
                rpc_error(
                    INVALID_REQUEST, "Method not allowed: this server is stateless; use POST"
                ),
                [(b"allow", b"POST, OPTIONS")] + cors,
            )

        self_url = self.resource_url or own_url(scope, headers)
        authorization = headers.get("authorization")
        try:
            token = bearer_from_header(authorization)
        except MalformedToken:
            reason = Reason.MISSING_TOKEN if authorization is None else Reason.MALFORMED_TOKEN
            return await self._failed_authentication(
                send, record, reason, self_url, cors, sent=authorization is not None
            )
        authentication: Authentication = await _authenticate(token)
        del token
        if authentication.principal is None:
            # A failure authenticate_token may learn to report is still a refusal, never a 500.
            reason = _AUTHENTICATION_FAILURES.get(authentication.failure, Reason.UNKNOWN_TOKEN)
            return await self._failed_authentication(
                send, record, reason, self_url, cors, sent=True
            )
        principal = record.principal = authentication.principal
        # The bearer is known: its delegation's limit comes before anything else is read.
        retry_after = await self.rate_limits.delegation_retry_after(principal.delegation_id)
        if retry_after:
            return await self._refuse_rate(send, record, retry_after, Reason.RATE_LIMITED, cors)
        if not principal.permitted:
            return await self._forbidden(
                send, record, Reason.STAKEHOLDER_NOT_PERMITTED, self_url, cors
            )

        if not _is_json(headers.get("content-type", "")):
            return await self._refuse(
                send,
                record,
                415,
                Outcome.MALFORMED,
                Reason.CONTENT_TYPE,
                rpc_error(INVALID_REQUEST, "Content-Type must be application/json"),
                cors,
            )
        body = await _read_body(receive, self.max_body_bytes)
        if body is None:
            return await self._refuse(
                send,
                record,
                413,
                Outcome.TOO_LARGE,
                Reason.TOO_LARGE,
                rpc_error(INVALID_REQUEST, "Request body too large"),
                cors,
            )
        message, problem = parse_message(body)
        if message is None:
            code = PARSE_ERROR if problem == "Parse error" else INVALID_REQUEST
            return await self._refuse(
                send,
                record,
                400,
                Outcome.MALFORMED,
                Reason.MALFORMED,
                rpc_error(code, problem),
                cors,
            )
        method = message.get("method") if isinstance(message.get("method"), str) else ""
        record.action = ACTIONS.get(method, AuditEvent.Action.MCP_REQUEST)
        record.rpc_method = method if method in ACTIONS else ""
        params = message.get("params") if isinstance(message.get("params"), dict) else {}
        if method == "tools/call":
            tool = params.get("name")
            record.tool = redact_secrets(tool, known=known)[:128] if isinstance(tool, str) else ""
            if record.tool not in principal.tools:
                return await self._forbidden(
                    send, record, Reason.TOOL_NOT_DELEGATED, self_url, cors, needed=record.tool
                )
            arguments = params.get("arguments")
            if isinstance(arguments, dict) and isinstance(arguments.get("prompt"), str):
                record.prompt_length = len(arguments["prompt"])
                record.prompt_hash = prompt_fingerprint(arguments["prompt"])

        scope = {
            **scope,
            "state": {
                **scope.get("state", {}),
                "principal": principal,
                "record": record,
                "message": message,
            },
        }
        await self.app(scope, _replay(body, receive), _with_headers(send, cors))

    async def _failed_authentication(self, send, record, reason, resource_url, cors, *, sent):
        """401, or 429 once this address has failed too often: a failure counts against its
        address, and only failures are refused for it (a valid bearer from the same address,
        behind the same NAT or proxy, is never locked out by others' mistakes)."""
        retry_after = await self.rate_limits.failed_authentication_retry_after(
            record.client or "unknown"
        )
        if retry_after:
            return await self._refuse_rate(
                send, record, retry_after, Reason.AUTH_RATE_LIMITED, cors
            )
        return await self._unauthorized(send, record, reason, resource_url, cors, sent=sent)

    def _origin_allowed(self, origin: str, host: str) -> bool:
        origin = origin.rstrip("/").lower()
        # Same-origin pages are safe: the Host header has already passed the allowlist, so this
        # cannot be a rebinding of a foreign name onto our address.
        same_origin = origin in (f"http://{host.lower()}", f"https://{host.lower()}")
        return same_origin or origin in self.allowed_origins

    async def _refuse(self, send, record, status, outcome, reason, body, extra_headers=()):
        record.outcome, record.reason = outcome, reason
        return await json_reply(send, status, body, extra_headers)

    async def _refuse_rate(self, send, record, retry_after, reason, cors):
        record.outcome, record.reason = Outcome.RATE_LIMITED, reason
        body = rpc_error(RATE_LIMITED, "Too many requests; try again later")
        return await json_reply(
            send, 429, body, [(b"retry-after", str(retry_after).encode())] + cors
        )

    async def _unauthorized(self, send, record, reason, resource_url, cors, *, sent: bool):
        record.outcome, record.reason = Outcome.UNAUTHENTICATED, reason
        metadata_url = protected_resource_metadata_url(resource_url)
        challenge = f'Bearer realm="hyperbook", resource_metadata="{metadata_url}"'
        if sent:
            challenge += (
                ', error="invalid_token", error_description="The token is invalid or expired"'
            )
        body = {
            "error": "invalid_token" if sent else "unauthorized",
            "error_description": "A valid VPD bearer token is required",
        }
        return await json_reply(send, 401, body, [(b"www-authenticate", challenge.encode())] + cors)

    async def _forbidden(self, send, record, reason, resource_url, cors, *, needed: str = ""):
        """403. `needed` is the tool the call asked for and the grant lacks: RFC 6750's scope=
        names it (our scopes are the tools' names), so a signing-in client can ask for it."""
        record.outcome, record.reason = Outcome.FORBIDDEN, reason
        challenge = (
            f'Bearer realm="hyperbook", error="insufficient_scope", '
            f'resource_metadata="{protected_resource_metadata_url(resource_url)}"'
        )
        if needed and TOOL_NAME_RE.match(needed):
            challenge += f', scope="{needed}"'
        body = {
            "error": "insufficient_scope",
            "error_description": "This user may not use this tool or data",
        }
        return await json_reply(send, 403, body, [(b"www-authenticate", challenge.encode())] + cors)


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
    stack = [(message, 1)]
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
