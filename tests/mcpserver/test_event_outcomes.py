"""What each kind of /mcp request is recorded as: its event's action, outcome and reason (detail),
against a real server process, for every refusal the gate makes and the tool errors it reports."""

import json
from datetime import timedelta

import httpx
import pytest
from django.db import connection
from django.utils import timezone

from audit.models import AuditEvent
from kb.models import Stakeholder
from registry.models import TokenDelegation
from registry.services import delegation_issue, delegation_revoke
from tests.live import live_server
from tests.mcpserver.conftest import MCP_HEADERS, TOOL, Server, call, rpc

pytestmark = [pytest.mark.db, pytest.mark.slow]

ALLOWED_ORIGIN = "http://127.0.0.1:8000"
UNKNOWN_TOKEN = "hbvpd_" + "NotAToken0123456789abcdefghijklmnopqrstu"


@pytest.fixture(autouse=True)
def committed(django_db_setup, django_db_blocker):
    """Read what the server process committed, in autocommit, as its own reader would."""
    with django_db_blocker.unblock():
        yield


def recorded(response: httpx.Response) -> tuple[int, str, str, str]:
    connection.close()  # read the server's commits with a fresh connection
    (event,) = AuditEvent.objects.filter(request_id=response.headers["x-request-id"])
    assert event.http_status == response.status_code
    return response.status_code, event.action, event.outcome, event.detail


def send(server: Server, token: str | None, body=None, headers=None, method="POST"):
    all_headers = {**MCP_HEADERS, **(headers or {})}
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    content = body if isinstance(body, bytes) else json.dumps(body or rpc("tools/list"))
    return httpx.request(method, server.mcp, content=content, headers=all_headers, timeout=30)


def initialize() -> dict:
    return rpc(
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )


# name -> (token: stakeholder id, "unknown", "none", "no_tool" or a raw header, body, headers,
#          HTTP method) and what the request's event records.
CASES = {
    "tools/list": (("KB-P-001", None, None, "POST"), (200, "mcp.tools_list", "allowed", "")),
    "initialize": (
        ("KB-P-001", initialize(), None, "POST"),
        (200, "mcp.initialize", "allowed", ""),
    ),
    "ping": (("KB-P-001", rpc("ping"), None, "POST"), (200, "mcp.ping", "allowed", "")),
    "a notification": (
        ("KB-P-001", {"jsonrpc": "2.0", "method": "notifications/initialized"}, None, "POST"),
        (202, "mcp.notifications_initialized", "allowed", ""),
    ),
    "a method of the client's invention": (
        ("KB-P-001", rpc("x/evil"), None, "POST"),
        (200, "mcp.request", "allowed", ""),
    ),
    "a preflight": (
        ("none", b"", {"Origin": ALLOWED_ORIGIN}, "OPTIONS"),
        (204, "mcp.preflight", "allowed", ""),
    ),
    "no token": (
        ("none", None, None, "POST"),
        (401, "mcp.request", "unauthenticated", "missing_token"),
    ),
    "a malformed token": (
        ("Bearer", None, None, "POST"),
        (401, "mcp.request", "unauthenticated", "malformed_token"),
    ),
    "an unknown token": (
        ("unknown", None, None, "POST"),
        (401, "mcp.request", "unauthenticated", "unknown"),
    ),
    "a suspended stakeholder": (
        ("KB-P-099", call("담당 고객 목록"), None, "POST"),
        (403, "mcp.request", "forbidden", "stakeholder_not_permitted"),
    ),
    "a tool outside the delegation": (
        ("no_tool", call("담당 고객 목록"), None, "POST"),
        (403, "mcp.tools_call", "forbidden", "tool_not_delegated"),
    ),
    "a wrong origin": (
        ("KB-P-001", None, {"Origin": "http://evil.example"}, "POST"),
        (403, "mcp.request", "refused_origin", "origin"),
    ),
    "a foreign host": (
        ("KB-P-001", None, {"Host": "evil.example"}, "POST"),
        (403, "mcp.request", "refused_host", "host"),
    ),
    # The spec's probes, declined as it allows: recorded as what they are, not as malformed.
    "a GET for a server stream": (
        ("KB-P-001", b"", {"Accept": "text/event-stream"}, "GET"),
        (405, "mcp.stream_open", "not_offered", ""),
    ),
    "a DELETE ending a session": (
        ("KB-P-001", b"", {"Mcp-Session-Id": "s-1"}, "DELETE"),
        (405, "mcp.session_end", "not_offered", ""),
    ),
    "a PUT": (("KB-P-001", b"", None, "PUT"), (405, "mcp.request", "malformed", "method")),
    "a wrong content type": (
        ("KB-P-001", None, {"Content-Type": "text/plain"}, "POST"),
        (415, "mcp.request", "malformed", "content_type"),
    ),
    "a body over the limit": (
        ("KB-P-001", json.dumps(call("가" * 70000)).encode(), None, "POST"),
        (413, "mcp.request", "too_large", "too_large"),
    ),
    "malformed JSON": (
        ("KB-P-001", b"{not json", None, "POST"),
        (400, "mcp.request", "malformed", "malformed"),
    ),
    "a protocol version the SDK refuses": (
        ("KB-P-001", None, {"MCP-Protocol-Version": "1999-01-01"}, "POST"),
        (400, "mcp.tools_list", "error", ""),
    ),
    "invalid tool arguments": (
        ("KB-P-001", rpc("tools/call", {"name": TOOL, "arguments": {"limit": 5}}), None, "POST"),
        (200, "mcp.tools_call", "tool_error", "invalid_arguments"),
    ),
    "a condition on a masked column": (
        ("KB-H-001", call("고객 전화번호 순으로"), None, "POST"),
        (200, "mcp.tools_call", "refused", "masked_condition"),
    ),
    "a question with a word the reader cannot use": (
        ("KB-P-001", call("VIP 고객 xyzzy 목록"), None, "POST"),
        (200, "mcp.tools_call", "refused", "unread_words"),
    ),
    "a question about data the KB does not hold": (
        ("KB-P-001", call("고객 주소 목록"), None, "POST"),
        (200, "mcp.tools_call", "refused", "out_of_data"),
    ),
}


def token_for(world, who: str) -> str | None:
    if who == "none":
        return None
    if who == "unknown":
        return UNKNOWN_TOKEN
    if who == "no_tool":
        return world.no_tool_token
    return world.tokens.get(who, who)


@pytest.mark.parametrize(("request_", "expected"), list(CASES.values()), ids=list(CASES))
def test_each_request_is_recorded_with_its_action_outcome_and_reason(
    server, world, request_, expected
):
    who, body, headers, method = request_
    response = send(server, token_for(world, who), body, headers, method)
    assert recorded(response) == expected


def test_a_client_cannot_invent_an_action_nor_keep_its_method_name(server, world):
    for method in ("x/evil", "registry/server_deleted", "refusals/summary", "tools/list/x"):
        response = send(server, world.tokens["KB-P-001"], rpc(method))
        assert recorded(response) == (200, "mcp.request", "allowed", "")
        (event,) = AuditEvent.objects.filter(request_id=response.headers["x-request-id"])
        assert event.rpc_method == ""


def test_an_expired_or_revoked_token_is_recorded_with_why_it_failed(server, world):
    planner = Stakeholder.objects.get(stakeholder_id="KB-P-001")
    later = timezone.now() + timedelta(days=1)
    expired, expired_token = delegation_issue(stakeholder=planner, agent_name="t", expires_at=later)
    TokenDelegation.objects.filter(pk=expired.pk).update(expires_at=timezone.now())
    revoked, revoked_token = delegation_issue(stakeholder=planner, agent_name="t", expires_at=later)
    delegation_revoke(delegation=revoked, reason="lost laptop")
    assert recorded(send(server, expired_token)) == (
        401,
        "mcp.request",
        "unauthenticated",
        "expired",
    )
    assert recorded(send(server, revoked_token)) == (
        401,
        "mcp.request",
        "unauthenticated",
        "revoked",
    )


def test_requests_over_a_rate_are_recorded_as_rate_limited_with_which_rate(world, tmp_path):
    env = {"MCP_RATE_LIMIT": "1/minute", "MCP_AUTH_FAILURE_LIMIT": "1/minute", "REDIS_URL": ""}
    with live_server(tmp_path / "server.log", env) as url:
        strict = Server(url=url, log=tmp_path / "server.log")
        token = world.tokens["KB-P-002"]
        assert send(strict, token).status_code == 200
        over_delegation = send(strict, token)
        assert send(strict, UNKNOWN_TOKEN).status_code == 401
        over_failures = send(strict, UNKNOWN_TOKEN)
    assert recorded(over_delegation) == (429, "mcp.request", "rate_limited", "rate_limited")
    assert recorded(over_failures) == (429, "mcp.request", "rate_limited", "auth_rate_limited")


@pytest.mark.parametrize(
    ("prompt", "said"),
    [
        ("VIP 고객 xyzzy 목록", ["'xyzzy'", "VIP"]),
        ("customers and their home addresses", ["'addresses'", "The KB holds no data"]),
    ],
)
def test_a_question_it_cannot_fully_use_is_a_tool_error_that_names_the_words(
    server, world, prompt, said
):
    result = send(server, world.tokens["KB-P-001"], call(prompt)).json()["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert all(part in text for part in said), text
    assert "structuredContent" not in result or not result["structuredContent"]
