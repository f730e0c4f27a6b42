"""The client against a bare official-SDK server (MCPServer, stateless HTTP, JSON responses):
the kb_vector_mcp and local 8500 (custom_python) registrations keep working."""

import socket
import threading
import time
from typing import Any

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from registry import services
from registry.mcp import errors
from tests.registry.conftest import (
    custom_python_declaration,
    kb_call,
    unique_id,
    vector_declaration,
)

pytestmark = [pytest.mark.db, pytest.mark.slow]

SERVICE_TOKEN = "vector-service-token-0123456789"


def build_sdk_server() -> MCPServer:
    sdk = MCPServer("legacy-peers", version="1.0.0")

    @sdk.tool(name="kb.vector.search", description="Search KB documents by meaning.")
    def vector_search(prompt: str, limit: int = 5) -> dict[str, Any]:
        hits = [{"doc_id": f"D-{n}", "score": 1 / n, "query": prompt} for n in range(1, limit + 1)]
        return {"hits": hits, "row_count": len(hits)}

    @sdk.tool(name="rag.search", description="Answer from the local RAG index.")
    def rag_search(prompt: str, limit: int = 3) -> str:
        return f"{limit} passages about {prompt}"

    return sdk


class AuthorizationRecorder:
    """ASGI middleware: which Authorization header (if any) each request carried."""

    def __init__(self, app):
        self.app = app
        self.seen: list[str | None] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            value = headers.get(b"authorization")
            self.seen.append(value.decode() if value is not None else None)
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def sdk_server():
    app = AuthorizationRecorder(
        build_sdk_server().streamable_http_app(stateless_http=True, json_response=True)
    )
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "SDK server did not start"
        time.sleep(0.02)
    app.url = f"http://127.0.0.1:{port}/mcp"
    yield app
    uv.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture
def vector(sdk_server, register, monkeypatch):
    monkeypatch.setenv("KB_VECTOR_MCP_TOKEN", SERVICE_TOKEN)
    return register(
        vector_declaration(
            unique_id("kb_vector_mcp"),
            sdk_server.url,
            description="KB vector search MCP (document retrieval).",
        )
    )


@pytest.fixture
def rag(sdk_server, register):
    return register(
        custom_python_declaration(
            unique_id("local_rag_8500"), sdk_server.url, description="Local RAG MCP on port 8500."
        )
    )


def test_the_vector_declaration_discovers_its_tool_on_an_sdk_server(vector, sdk_server):
    discovery = services.kb_tools_discover(server=vector, token=None, trust_first_use=True)
    assert set(discovery.tool_names) == {"kb.vector.search", "rag.search"}
    assert discovery.tool == "kb.vector.search"
    assert discovery.protocol_version == "2025-11-25"
    assert discovery.session_issued is False
    assert discovery.pin_state == "pinned"


def test_the_vector_server_is_called_with_its_service_token_not_the_users(vector, sdk_server):
    before = len(sdk_server.seen)
    result = kb_call(
        vector, "hbvpd_users-own-token-0123456789", "보험 약관", 4, trust_first_use=True
    )
    assert result.is_error is False
    assert result.answer["row_count"] == 4
    assert result.answer["hits"][0]["query"] == "보험 약관"
    assert set(sdk_server.seen[before:]) == {f"Bearer {SERVICE_TOKEN}"}


def test_the_custom_python_declaration_calls_its_tool_without_credentials(rag, sdk_server):
    before = len(sdk_server.seen)
    result = kb_call(rag, "hbvpd_users-own-token-0123456789", "청구 절차", 2, trust_first_use=True)
    assert result.is_error is False
    assert result.text == "2 passages about 청구 절차"
    assert result.answer == {"result": "2 passages about 청구 절차"}
    assert set(sdk_server.seen[before:]) == {None}  # declared without auth: no header at all


def test_a_tool_the_declaration_does_not_allow_is_blocked_before_any_request(rag, sdk_server):
    before = len(sdk_server.seen)
    with pytest.raises(errors.ToolNotAllowed):
        kb_call(rag, None, "질문", 2, tool="kb.vector.search", trust_first_use=True)
    assert len(sdk_server.seen) == before
