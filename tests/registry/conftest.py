"""Fixtures for the MCP client tests: our own /mcp (re-exported), a fault server, a bystander,
and registered servers committed for the duration of a test."""

import uuid

import pytest

from registry import services
from registry.declarations import KB_TOOL_NAME, validate_mcp_server
from registry.models import McpServer
from registry.services import server_save
from tests.mcpserver.conftest import server, world  # noqa: F401  (re-exported fixtures)
from tests.registry.fault_server import FaultServer, RecordingServer, serving


def declaration(server_id: str, provider: str, tool: str) -> dict:
    """What every server declaration has (as config/mcp_servers.json writes it), allowing `tool`."""
    return {
        "id": server_id,
        "enabled": True,
        "provider": provider,
        "transport": "streamable_http",
        "default_tool": tool,
        "tool_allowlist": [tool],
        "router_mode": "direct",
    }


def kb_declaration(server_id: str = "kb_mcp", **overrides) -> dict:
    return {
        **declaration(server_id, "kb_vpd_streamable_http", KB_TOOL_NAME),
        "base_url_env": "KB_MCP_BASE_URL",
        "endpoint_path": "/mcp",
        "auth_delivery": "per_request_vpd_bearer",
        "timeout_seconds_env": "POC3_MCP_TIMEOUT_SECONDS",
        "description": "KB VPD Select AI MCP (tests)",
        **overrides,
    }


def custom_python_declaration(
    server_id: str = "local_rag_8500", endpoint_url: str = "http://127.0.0.1:8500/mcp", **overrides
) -> dict:
    """A third-party server: never sent a user's bearer."""
    return {
        **declaration(server_id, "custom_python", "rag.search"),
        "endpoint_url": endpoint_url,
        **overrides,
    }


def vector_declaration(
    server_id: str = "kb_vector_mcp", endpoint_url: str = "http://127.0.0.1:8600/mcp", **overrides
) -> dict:
    """The KB's vector search: sent its own service token (KB_VECTOR_MCP_TOKEN), never a user's."""
    return {
        **declaration(server_id, "kb_vector", "kb.vector.search"),
        "endpoint_url": endpoint_url,
        "token_env": "KB_VECTOR_MCP_TOKEN",
        **overrides,
    }


def unique_id(prefix: str = "fault") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def committed_db(django_db_setup, django_db_blocker):
    """Database access in autocommit: what the client writes is committed at once, so no open
    transaction in this process holds SQLite's write lock while a server process writes."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture
def register(committed_db):
    """register(mapping) -> McpServer, saved through the service; removed after the test."""
    created: list[str] = []

    def register(mapping: dict) -> McpServer:
        saved, _ = server_save(declaration=validate_mcp_server(mapping))
        created.append(saved.server_id)
        return saved

    yield register
    McpServer.objects.filter(server_id__in=created).delete()


@pytest.fixture
def fault():
    with serving(FaultServer()) as app:
        yield app


@pytest.fixture
def elsewhere():
    with serving(RecordingServer()) as app:
        yield app


@pytest.fixture
def fault_kb(fault, register):
    """A registered KB server (unique id) whose KB_MCP_BASE_URL is the fault server."""
    registered = register(kb_declaration(unique_id()))
    return registered, {"KB_MCP_BASE_URL": fault.url}


def kb_call(registered, token, prompt, limit, **kwargs):
    """`services.kb_tool_call`, its four usual arguments by position."""
    return services.kb_tool_call(
        server=registered, token=token, prompt=prompt, limit=limit, **kwargs
    )
