"""The single-exchange path answers handshake-era requests exactly as the SDK's own transport does.

Both sides wrap the same `Server` (ours, from `build_server`): the SDK's stateless JSON transport
(`StreamableHTTPSessionManager`) and `mcpserver.exchange`. Each message goes to both, as raw ASGI
calls, and the status, content type and JSON-RPC body must match (or differ only where this module
says it deliberately does).
"""

import json

import anyio
import pytest
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from mcpserver import exchange
from mcpserver.server import build_server

HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2025-11-25",
}


def _scope(headers: dict[str, str], method: str = "POST") -> dict:
    return {
        "type": "http",
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


async def _call(app, message, headers) -> tuple[int, dict, object]:
    body = json.dumps(message).encode()
    sent = []
    delivered = False

    async def receive():
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep_forever()

    async def send(event):
        sent.append(event)

    await app(_scope(headers), receive, send)
    start = next(e for e in sent if e["type"] == "http.response.start")
    payload = b"".join(e.get("body", b"") for e in sent if e["type"] == "http.response.body")
    response_headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
    return start["status"], response_headers, json.loads(payload) if payload else None


async def _both(message, headers=HEADERS):
    server = build_server()
    manager = StreamableHTTPSessionManager(app=server, json_response=True, stateless=True)
    async with manager.run():
        sdk = await _call(manager.handle_request, message, headers)

        async def ours(scope, receive, send):
            state = manager._lifespan_state
            await exchange.serve_exchange(server, state, message, scope, receive, send)

        mine = await _call(ours, message, headers)
    return sdk, mine


def _same(message, headers=HEADERS):
    (sdk_status, sdk_headers, sdk_body), (status, response_headers, body) = anyio.run(
        _both, message, headers
    )
    assert status == sdk_status, (sdk_body, body)
    assert response_headers.get("content-type") == sdk_headers.get("content-type")
    assert body == sdk_body
    return body


def test_initialize_is_negotiated_as_the_sdk_negotiates_it():
    for offered in ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "1999-01-01"):
        body = _same(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": offered,
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        )
        assert body["result"]["serverInfo"]["name"] == "hyperbook-kb"


def test_tools_list_ping_and_string_ids_match():
    body = _same({"jsonrpc": "2.0", "id": "list-1", "method": "tools/list"})
    assert [tool["name"] for tool in body["result"]["tools"]] == ["ords.query.kb_select_ai_vpd"]
    assert _same({"jsonrpc": "2.0", "id": 7, "method": "ping"}) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {},
    }


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "id": 2, "method": "resources/list"},  # not served: -32601
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method"},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"arguments": {}}},  # no name
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope"}},
    ],
)
def test_errors_from_the_kernel_match(message):
    body = _same(message)
    assert "error" in body and body["id"] == message["id"]


def test_a_request_without_a_protocol_version_header_is_served_at_the_default():
    headers = {k: v for k, v in HEADERS.items() if k != "mcp-protocol-version"}
    _same({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers)


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "id": 9, "result": {}},  # a response posted by the client
    ],
)
def test_notifications_and_responses_are_accepted_with_202(message):
    (sdk_status, _, sdk_body), (status, _, body) = anyio.run(_both, message)
    assert (status, body) == (sdk_status, sdk_body) == (202, None)


def test_a_client_that_does_not_accept_json_is_406():
    headers = {**HEADERS, "accept": "text/event-stream"}
    (sdk_status, _, _), (status, _, body) = anyio.run(
        _both, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers
    )
    assert status == sdk_status == 406
    assert body["error"]["code"] == -32600


def test_an_invalid_envelope_is_400_without_validator_text():
    # Deliberately different from the SDK's 400 here: it quotes pydantic's message on the wire.
    message = {"jsonrpc": "1.0", "id": 1, "method": "tools/list"}
    (sdk_status, _, _), (status, _, body) = anyio.run(_both, message)
    assert status == sdk_status == 400
    assert body["error"] == {"code": -32600, "message": "Invalid JSON-RPC message"}


def test_only_handshake_era_posts_take_this_path():
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert exchange.serves(_scope(HEADERS), message)
    assert exchange.serves(_scope({"content-type": "application/json"}), message)
    assert not exchange.serves(_scope({**HEADERS, "mcp-protocol-version": "2026-07-28"}), message)
    assert not exchange.serves(_scope({**HEADERS, "mcp-protocol-version": "garbage"}), message)
    assert not exchange.serves(_scope(HEADERS, method="GET"), message)
    assert not exchange.serves(_scope(HEADERS), [message])
