"""The official MCP Python SDK client, as a real peer of our /mcp."""

import asyncio

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.mcpserver.conftest import TOOL

pytestmark = [pytest.mark.db, pytest.mark.slow]


async def list_and_call(url: str, token: str, prompt: str, limit: int = 100):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                initialized = await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool(TOOL, {"prompt": prompt, "limit": limit})
    return initialized, tools, result


def test_the_sdk_client_lists_and_calls_the_tool(server, world):
    initialized, tools, result = asyncio.run(
        list_and_call(server.mcp, world.tokens["KB-P-001"], "담당 고객 목록", 5)
    )
    assert initialized.protocol_version == "2025-11-25"
    assert [tool.name for tool in tools.tools] == [TOOL]
    assert not result.is_error, result.content
    answer = result.structured_content
    assert answer["stakeholder"]["id"] == "KB-P-001"
    assert 0 < answer["row_count"] <= 5
    assert all(row["customer_id"] for row in answer["rows"])


def test_a_planner_and_a_branch_manager_get_different_policy_exact_rows(server, world):
    prompt = "담당 고객의 보험료 상세를 보여줘"
    _, _, planner = asyncio.run(list_and_call(server.mcp, world.tokens["KB-P-001"], prompt))
    _, _, manager = asyncio.run(list_and_call(server.mcp, world.tokens["KB-M-001"], prompt))
    planner_rows = planner.structured_content["rows"]
    manager_rows = manager.structured_content["rows"]
    planner_customers = {row["customer_id"] for row in planner_rows}
    manager_customers = {row["customer_id"] for row in manager_rows}
    assert planner_rows and manager_rows
    assert planner_rows != manager_rows
    assert planner_customers <= world.visible_customers["KB-P-001"]
    assert manager_customers <= world.visible_customers["KB-M-001"]
    # The manager's branch has customers of other planners; the planner never sees those.
    assert manager_customers - world.visible_customers["KB-P-001"]
    # Column policy: the branch manager sees phone numbers with the middle masked.
    assert all("****" in row["phone"] for row in manager_rows if row.get("phone"))


def test_a_condition_on_a_masked_column_is_a_tool_error_that_says_why(server, world):
    token = world.tokens["KB-H-001"]
    _, _, korean = asyncio.run(list_and_call(server.mcp, token, "주민번호가 87로 시작하는 고객 수"))
    _, _, english = asyncio.run(
        list_and_call(server.mcp, token, "customers whose rrn starts with 87")
    )
    assert korean.is_error and english.is_error
    assert "주민등록번호(rrn)" in korean.content[0].text and "가려져" in korean.content[0].text
    assert "(rrn)" in english.content[0].text and "masked" in english.content[0].text
    assert korean.structured_content is None  # no rows, not even a count


# --- refusals the SDK client can show ------------------------------------------------------------


async def sdk_refusal(url: str, token: str | None, *, call: str | None = None) -> MCPError:
    """The error the SDK client raises for our refusal: of initialize, or of a tools/call."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                with pytest.raises(MCPError) as refused:
                    if call is None:
                        await session.initialize()
                    else:
                        await session.initialize()
                        await session.call_tool(call, {"prompt": "담당 고객 목록"})
    return refused.value


@pytest.mark.parametrize(
    ("token", "says"),
    [
        (None, "Authentication required"),
        ("hbvpd_forged-token-that-was-never-issued-000000000", "not known to this server"),
    ],
    ids=["no-token", "forged-token"],
)
def test_the_sdk_client_shows_what_a_401_means_and_what_to_do(server, token, says):
    error = asyncio.run(sdk_refusal(server.mcp, token))

    assert error.error.message != "Server returned an error response"
    assert says in error.error.message
    assert (
        "Authorization: Bearer <token>" in error.error.message or "operator" in error.error.message
    )
    assert error.error.code == -32001


def test_the_sdk_client_shows_why_a_valid_token_is_forbidden(server, world):
    suspended = asyncio.run(sdk_refusal(server.mcp, world.tokens["KB-P-099"]))
    not_delegated = asyncio.run(sdk_refusal(server.mcp, world.no_tool_token, call=TOOL))

    assert suspended.error.code == not_delegated.error.code == -32003
    # Korean by default (the SDK sends no Accept-Language): suspended, ask an operator.
    assert suspended.error.message.startswith("정지된 사용자: 운영자에게 문의하세요")
    assert "not among the token's delegated tools" in not_delegated.error.message


def test_401_and_403_bodies_are_json_rpc_errors_beside_the_challenge(server, world):
    unknown = server.post(
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
        token="hbvpd_forged-token-that-was-never-issued-000000000",
    )
    not_delegated = server.post(
        {
            "jsonrpc": "2.0",
            "id": "call-7",
            "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"prompt": "x"}},
        },
        token=world.no_tool_token,
    )

    assert unknown.status_code == 401
    body = unknown.json()
    # Refused before the body was read: no id to echo, and the SDK puts its own in.
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["data"] == {
        "error": "invalid_token",
        "error_description": "The token is not known: sign in again",
    }
    challenge = unknown.headers["www-authenticate"]
    assert 'error_description="The token is not known: sign in again"' in challenge
    assert not_delegated.status_code == 403
    assert not_delegated.json()["id"] == "call-7"  # parsed by then: the request's own id
    assert not_delegated.json()["error"]["data"]["error"] == "insufficient_scope"


@pytest.mark.parametrize(
    ("headers", "setting"),
    [
        ({"Host": "evil.example.com"}, "MCP_ALLOWED_HOSTS"),
        ({"Origin": "http://evil.example.com"}, "MCP_ALLOWED_ORIGINS"),
    ],
    ids=["host", "origin"],
)
def test_host_and_origin_refusals_name_the_setting_to_change(server, world, headers, setting):
    refused = server.post(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        token=world.tokens["KB-P-001"],
        headers=headers,
    )

    assert refused.status_code == 403
    assert setting in refused.json()["error"]["message"]
