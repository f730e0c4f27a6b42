"""The /mcp status matrix, against a real server process on loopback."""

import json
import time
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from kb.models import Stakeholder
from registry.models import TokenDelegation
from registry.services import delegation_issue, delegation_revoke
from tests.mcpserver.conftest import MCP_HEADERS, TOOL, call, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]


def planner_token(world) -> str:
    return world.tokens["KB-P-001"]


def test_tools_list_with_a_valid_token_returns_exactly_the_one_tool(server, world):
    response = server.post(rpc("tools/list"), planner_token(world))
    assert response.status_code == 200
    tools = response.json()["result"]["tools"]
    assert [t["name"] for t in tools] == [TOOL]
    schema = tools[0]["inputSchema"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"prompt", "limit"}
    assert schema["properties"]["limit"]["minimum"] == 1
    assert schema["properties"]["limit"]["maximum"] == 100
    assert schema["properties"]["prompt"]["maxLength"] == 2000
    assert "outputSchema" in tools[0]


def test_every_response_carries_a_request_id(server, world):
    ok = server.post(rpc("tools/list"), planner_token(world))
    refused = server.post(rpc("tools/list"))
    assert len(ok.headers["x-request-id"]) >= 8
    assert refused.headers["x-request-id"] != ok.headers["x-request-id"]


def test_initialize_negotiates_the_requested_version(server, world):
    for version in ("2025-03-26", "2025-06-18", "2025-11-25"):
        body = rpc(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "tests", "version": "1"},
            },
        )
        response = server.post(
            body, planner_token(world), headers={"MCP-Protocol-Version": version}
        )
        assert response.status_code == 200, response.text
        assert response.json()["result"]["protocolVersion"] == version
        assert "mcp-session-id" not in response.headers


def test_a_missing_token_is_401_with_a_resource_metadata_challenge(server):
    response = server.post(rpc("tools/list"))
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert 'resource_metadata="' in challenge
    assert "/.well-known/oauth-protected-resource/mcp" in challenge
    assert "invalid_token" not in challenge
    # The agent is told it may sign in, and where: the resource metadata the challenge names.
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]
    error = response.json()["error"]
    assert "sign in" in error["message"] and metadata_url in error["message"]
    assert "sign in" in error["data"]["error_description"]
    assert metadata_url in error["data"]["error_description"]


@pytest.mark.parametrize(
    "authorization",
    [
        "Bearer hbvpd_forged-token-that-was-never-issued-000",
        "Bearer",
        "Basic dXNlcjpwYXNz",
        "hbvpd_no-scheme-at-all-0000000000000000",
        "Bearer a b",
        "Bearer <script>",
    ],
)
def test_a_forged_or_malformed_token_is_401_invalid_token(server, authorization):
    headers = {**MCP_HEADERS, "Authorization": authorization}
    response = httpx.post(server.mcp, json=rpc("tools/list"), headers=headers, timeout=10)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


@pytest.mark.parametrize("variant", ["bearer {t}", "BEARER {t}", "Bearer   {t}", "Bearer \t{t}"])
def test_the_bearer_scheme_is_case_insensitive_and_whitespace_tolerant(server, world, variant):
    headers = {**MCP_HEADERS, "Authorization": variant.format(t=planner_token(world))}
    response = httpx.post(server.mcp, json=rpc("tools/list"), headers=headers, timeout=10)
    assert response.status_code == 200


def test_a_token_in_the_query_string_is_not_accepted(server, world):
    response = httpx.post(
        f"{server.mcp}?access_token={planner_token(world)}",
        json=rpc("tools/list"),
        headers=MCP_HEADERS,
        timeout=10,
    )
    assert response.status_code == 401


def test_an_expired_token_is_401(server, world, django_db_blocker):
    with django_db_blocker.unblock():
        planner = Stakeholder.objects.get(stakeholder_id="KB-P-001")
        delegation, token = delegation_issue(
            stakeholder=planner,
            agent_name="tests",
            expires_at=timezone.now() + timedelta(seconds=2),
        )
    assert server.post(rpc("tools/list"), token).status_code == 200
    time.sleep(2.2)
    response = server.post(rpc("tools/list"), token)
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_a_revoked_token_fails_on_the_very_next_request(server, world, django_db_blocker):
    delegation_id, token = world.revocable
    assert server.post(rpc("tools/list"), token).status_code == 200
    with django_db_blocker.unblock():
        delegation = TokenDelegation.objects.get(pk=delegation_id)
        delegation_revoke(delegation=delegation, reason="lost laptop")
    assert server.post(rpc("tools/list"), token).status_code == 401


def test_a_suspended_stakeholder_is_403_ask_an_operator_not_insufficient_scope(server, world):
    """No scope would help a suspended user: a client that steps up scopes on insufficient_scope
    must not send them through sign-in again. Korean by default, English on request."""
    korean = server.post(call("담당 고객 목록"), world.tokens["KB-P-099"])
    english = server.post(
        call("담당 고객 목록"), world.tokens["KB-P-099"], headers={"Accept-Language": "en-US,en"}
    )
    for response in (korean, english):
        assert response.status_code == 403
        challenge = response.headers["www-authenticate"]
        assert "insufficient_scope" not in challenge and "scope=" not in challenge
        assert 'error="access_denied"' in challenge
        assert 'error_description="suspended: ask an operator"' in challenge
        assert "resource_metadata=" in challenge
        data = response.json()["error"]["data"]
        assert data == {"error": "access_denied", "error_description": "suspended: ask an operator"}
    assert korean.json()["error"]["message"].startswith("정지된 사용자: 운영자에게 문의하세요")
    assert english.json()["error"]["message"].startswith("suspended: ask an operator")


def test_a_branch_manager_without_a_branch_is_403_access_denied(server, world, django_db_blocker):
    manager = Stakeholder.objects.filter(stakeholder_id="KB-M-001")
    with django_db_blocker.unblock():
        manager.update(branch=None)
    try:
        response = server.post(call("지점 고객 목록"), world.tokens["KB-M-001"])
    finally:
        with django_db_blocker.unblock():
            manager.update(branch_id="BR-GN")
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="access_denied"' in challenge and "insufficient_scope" not in challenge
    assert "ask an operator" in challenge


def test_a_tool_outside_the_delegation_is_403(server, world):
    response = server.post(call("담당 고객 목록"), world.no_tool_token)
    assert response.status_code == 403
    challenge = response.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert f'scope="{TOOL}"' in challenge  # what a signing-in client asks for next


def test_an_unknown_tool_is_refused(server, world):
    body = rpc("tools/call", {"name": "drop.everything", "arguments": {}})
    response = server.post(body, planner_token(world))
    assert response.status_code == 403


@pytest.mark.parametrize(
    "origin", ["http://evil.example", "null", "http://127.0.0.1:8000.evil.example"]
)
def test_a_wrong_origin_is_403_before_authentication(server, world, origin):
    response = server.post(rpc("tools/list"), planner_token(world), headers={"Origin": origin})
    assert response.status_code == 403
    assert "www-authenticate" not in response.headers


def test_an_allowed_origin_is_served_with_cors_headers(server, world):
    origin = "http://127.0.0.1:8000"
    response = server.post(rpc("tools/list"), planner_token(world), headers={"Origin": origin})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == origin


def test_a_foreign_host_header_is_refused(server, world):
    response = server.post(
        rpc("tools/list"), planner_token(world), headers={"Host": "evil.example"}
    )
    assert response.status_code == 403


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_methods_other_than_post_are_405(server, world, method):
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {planner_token(world)}"}
    response = httpx.request(method, server.mcp, headers=headers, timeout=10)
    assert response.status_code == 405
    assert "POST" in response.headers["allow"]


def test_malformed_json_is_400_with_a_parse_error(server, world):
    response = server.post(b"{not json", planner_token(world))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32700


def test_a_batch_is_400_with_a_jsonrpc_error(server, world):
    response = server.post([rpc("tools/list"), rpc("ping", request_id=2)], planner_token(world))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600


def test_a_body_over_the_limit_is_413(server, world):
    huge = json.dumps(call("가" * 70000)).encode()
    response = server.post(huge, planner_token(world))
    assert response.status_code == 413
    assert "error" in response.json()


def test_a_wrong_content_type_is_415(server, world):
    response = server.post(
        json.dumps(rpc("tools/list")), planner_token(world), headers={"Content-Type": "text/plain"}
    )
    assert response.status_code == 415


def test_a_bad_protocol_version_header_is_400(server, world):
    response = server.post(
        rpc("tools/list"), planner_token(world), headers={"MCP-Protocol-Version": "1999-01-01"}
    )
    assert response.status_code == 400


def test_protected_resource_metadata_is_served(server):
    for path in (
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ):
        response = httpx.get(server.url + path, timeout=10)
        assert response.status_code == 200
        assert response.json()["resource"].endswith("/mcp")
        assert response.json()["bearer_methods_supported"] == ["header"]
        # hyperbook's own authorization server first: agents can sign in as their user.
        assert response.json()["authorization_servers"][0] == server.url
    metadata = httpx.get(
        response.json()["authorization_servers"][0] + "/.well-known/oauth-authorization-server",
        timeout=10,
    ).json()
    assert metadata["issuer"] == server.url
    assert metadata["authorization_endpoint"] == f"{server.url}/oauth/authorize/"


def test_the_django_admin_is_served_by_the_same_server(server):
    response = httpx.get(f"{server.url}/admin/login/", timeout=10)
    assert response.status_code == 200
    assert "Django" in response.text or "로그인" in response.text


def test_a_same_origin_page_is_allowed_whatever_the_port(server, world):
    own_origin = server.url  # http://127.0.0.1:<port>, not in MCP_ALLOWED_ORIGINS
    response = server.post(rpc("tools/list"), planner_token(world), headers={"Origin": own_origin})
    assert response.status_code == 200


def test_the_2026_07_28_request_path_lists_the_tool(server, world):
    # Protocol 2026-07-28 has no initialize handshake: each request carries its own envelope.
    envelope = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    }
    response = server.post(
        rpc("tools/list", envelope),
        planner_token(world),
        headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
    )
    assert response.status_code == 200, response.text
    assert [t["name"] for t in response.json()["result"]["tools"]] == [TOOL]


def test_a_2026_07_28_subscriptions_listen_is_answered_method_not_found(server, world):
    # Its SSE path watches for the client's disconnect: the request must not look disconnected
    # once the gate has read its body (it was then cancelled, and no response was ever sent).
    envelope = {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        },
        "notifications": {"toolsListChanged": True},
    }
    response = server.post(
        rpc("subscriptions/listen", envelope, request_id=7),
        planner_token(world),
        headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"},
    )
    # No listChanged or subscribe capability is offered, so there is nothing to listen to.
    assert response.status_code == 404, response.text
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "Method not found", "data": "subscriptions/listen"},
    }
    assert len(response.headers["x-request-id"]) >= 8  # the gate recorded it
    assert f"request_id={response.headers['x-request-id']} status=404" in server.log.read_text()
