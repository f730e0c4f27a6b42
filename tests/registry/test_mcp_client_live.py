"""The client against our own /mcp, served by a real uvicorn process on loopback."""

import pytest

from audit.models import AuditEvent
from registry import services
from registry.declarations import KB_TOOL_NAME
from registry.mcp import errors
from tests.registry.conftest import kb_call, kb_declaration

pytestmark = [pytest.mark.db, pytest.mark.slow]

PROMPT = "담당 고객의 보험료 상세를 보여줘"


@pytest.fixture
def kb(server, register):
    """The registered kb_mcp, its URL from KB_MCP_BASE_URL (our live server)."""
    return register(kb_declaration("kb_mcp")), {"KB_MCP_BASE_URL": server.url}


def customers(result) -> set[str]:
    return {row["customer_id"] for row in result.answer["rows"]}


def test_discovery_finds_exactly_our_tool_with_the_planners_token(kb, world):
    registered, environ = kb
    discovery = services.kb_tools_discover(
        server=registered, token=world.tokens["KB-P-001"], environ=environ, trust_first_use=True
    )
    assert discovery.tool_names == (KB_TOOL_NAME,)
    assert discovery.protocol_version == "2025-11-25"
    assert discovery.session_issued is False  # our /mcp is stateless
    assert discovery.server_info["name"] == "hyperbook-kb"
    assert discovery.definition["inputSchema"]["required"] == ["prompt"]
    assert discovery.pin_state in ("pinned", "unchanged")
    assert discovery.endpoint == f"{environ['KB_MCP_BASE_URL']}/mcp"


def test_the_planner_gets_their_own_customers(kb, world):
    registered, environ = kb
    result = kb_call(
        registered, world.tokens["KB-P-001"], PROMPT, 100, environ=environ, trust_first_use=True
    )
    assert result.is_error is False
    assert result.http_status == 200
    assert result.answer["stakeholder"]["id"] == "KB-P-001"
    assert result.row_count > 0
    assert "customer_id" in {column["name"] for column in result.answer["columns"]}
    assert customers(result) <= world.visible_customers["KB-P-001"]
    assert len(result.request_id) >= 8


def test_planner_and_branch_manager_see_different_rows_for_the_same_question(kb, world):
    registered, environ = kb
    planner = kb_call(
        registered,
        world.tokens["KB-P-001"],
        "담당 고객 목록",
        100,
        environ=environ,
        trust_first_use=True,
    )
    manager = kb_call(
        registered,
        world.tokens["KB-M-001"],
        "담당 고객 목록",
        100,
        environ=environ,
        trust_first_use=True,
    )
    assert customers(planner) == world.visible_customers["KB-P-001"]
    assert customers(manager) == world.visible_customers["KB-M-001"]
    assert customers(planner) < customers(manager)


def test_a_forged_token_is_401_token_invalid_or_expired(kb):
    registered, environ = kb
    forged = "hbvpd_forged-token-that-was-never-issued-000"
    with pytest.raises(errors.Unauthorized) as caught:
        kb_call(registered, forged, PROMPT, 5, environ=environ, trust_first_use=True)
    public = errors.to_public_mcp_error(caught.value)
    assert (public.http_status, public.message) == (401, "토큰이 유효하지 않거나 만료됨")
    assert caught.value.rpc_method == "initialize"


def test_a_suspended_users_token_is_403_no_permission(kb, world):
    registered, environ = kb
    with pytest.raises(errors.Forbidden) as caught:
        kb_call(
            registered, world.tokens["KB-P-099"], PROMPT, 5, environ=environ, trust_first_use=True
        )
    public = errors.to_public_mcp_error(caught.value)
    assert (public.http_status, public.message) == (403, "이 사용자에게 조회 권한 없음")


def test_a_token_delegated_for_another_tool_is_403_at_tools_call(kb, world):
    registered, environ = kb
    with pytest.raises(errors.Forbidden) as caught:
        kb_call(registered, world.no_tool_token, PROMPT, 5, environ=environ, trust_first_use=True)
    assert caught.value.rpc_method == "tools/call"


def test_the_server_audits_the_calls_request_id_and_never_the_token(kb, world):
    registered, environ = kb
    token = world.tokens["KB-P-002"]
    result = kb_call(registered, token, PROMPT, 5, environ=environ, trust_first_use=True)
    event = AuditEvent.objects.get(request_id=result.request_id)
    assert (event.rpc_method, event.tool, event.stakeholder_id) == (
        "tools/call",
        KB_TOOL_NAME,
        "KB-P-002",
    )
    assert event.row_count == result.row_count
    assert not AuditEvent.objects.filter(changes__icontains=token).exists()
