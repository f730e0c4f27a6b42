"""One stateless JSON exchange for the handshake-era protocol versions, on the SDK's request kernel.

This server is stateless and answers in JSON, so every POST is one request and one response. For
the handshake-era versions (2024-11-05 to 2025-11-25) the SDK's stateless transport still builds a
transport, memory streams, a dispatcher and a server task for each POST: about half of its cost
per request here (see docs/development.md, Performance). The SDK itself serves 2026-07-28 requests
as a single exchange through `mcp.server.runner.serve_one`; this module serves the earlier versions
the same way, with the same kernel (`ServerRunner`: initialize negotiation, per-version validation
and result shaping, handler lookup), so the wire behaviour is the SDK's (tests/mcpserver/
test_exchange.py sends each message to both and compares). Two deliberate differences: an invalid
envelope's 400 does not quote the validator's text, and an unexpected handler exception becomes
INTERNAL_ERROR, never the exception's own text (the SDK's legacy path sends `str(exc)`).

What stays with the SDK's own transport: every other HTTP method, 2026-07-28 and unknown
`MCP-Protocol-Version` values (its classifier answers those), and anything not already parsed by
the gate.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.message import MessageMetadata, ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import INVALID_REQUEST, JSONRPCRequest, RequestId, jsonrpc_message_adapter
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request

from mcpserver.http import json_reply, rpc_error

logger = logging.getLogger("hyperbook.mcp")

# The spec's default when a handshake-era client sends no MCP-Protocol-Version header.
DEFAULT_PROTOCOL_VERSION = "2025-03-26"


def serves(scope, message: object) -> bool:
    """Whether this POST is one this module answers (else the SDK's transport does)."""
    if scope["method"] != "POST" or not isinstance(message, dict):
        return False
    version = _protocol_version_header(scope)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


@dataclass
class _ExchangeContext:
    """The SDK's per-request dispatch context for one POST with a JSON response.

    There is no back-channel: a stateless server cannot receive the client's answer to a request of
    its own, and a JSON response has no place for notifications, so both are refused or dropped,
    exactly as on the SDK's stateless JSON transport.
    """

    transport: TransportContext
    request_id: RequestId
    message_metadata: MessageMetadata
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = field(default=False, init=False)

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts=None):
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts=None) -> None:
        logger.debug("dropped %s: a JSON response carries no notifications", method)

    async def progress(self, progress: float, total=None, message=None) -> None:
        return None


async def serve_exchange(server, lifespan_state, message: dict, scope, receive, send) -> None:
    """Answer one parsed JSON-RPC message (the gate has read, parsed and size-checked the body)."""
    request = Request(scope, receive)
    has_json, _ = check_accept_headers(request)
    if not has_json:
        return await json_reply(
            send,
            406,
            rpc_error(INVALID_REQUEST, "Not Acceptable: Client must accept application/json"),
        )
    try:
        parsed = jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return await json_reply(send, 400, rpc_error(INVALID_REQUEST, "Invalid JSON-RPC message"))
    if not isinstance(parsed, JSONRPCRequest):
        # Notifications and responses are acknowledged; a stateless server has nothing for them
        # to act on (there is no session to initialize and no request of ours to answer).
        return await json_reply(send, 202, None)

    version = _protocol_version_header(scope) or DEFAULT_PROTOCOL_VERSION
    connection = Connection.from_envelope(version, None, None)
    context = _ExchangeContext(
        transport=TransportContext(
            kind="streamable-http", can_send_request=False, headers=request.headers
        ),
        request_id=parsed.id,
        message_metadata=ServerMessageMetadata(request_context=request),
    )
    try:
        result = await serve_one(
            server,
            context,
            parsed.method,
            parsed.params,
            connection=connection,
            lifespan_state=lifespan_state,
        )
    except Exception as exc:  # mapped as the SDK maps it; internals never reach the wire
        error = modern_error_data(exc).model_dump(by_alias=True, mode="json", exclude_none=True)
        return await json_reply(send, 200, {"jsonrpc": "2.0", "id": parsed.id, "error": error})
    await json_reply(send, 200, {"jsonrpc": "2.0", "id": parsed.id, "result": result})


def _protocol_version_header(scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"mcp-protocol-version":
            return value.decode("latin-1")
    return None
