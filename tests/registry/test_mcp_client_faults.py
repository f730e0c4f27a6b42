"""The client against a server that misbehaves on purpose (tests/registry/fault_server.py).

Everything is real HTTP on 127.0.0.1: what the client sent is read back from the server's record.
"""

import json
import socket
import time

import pytest

from registry import pinning, services
from registry.declarations import KB_TOOL_NAME, validate_mcp_server
from registry.mcp import errors
from tests.registry.conftest import kb_call, kb_declaration, unique_id
from tests.registry.fault_server import Reply, kb_tool

pytestmark = [pytest.mark.db, pytest.mark.slow]

TOKEN = "hbvpd_" + "FaultServerToken0123456789abcdef"
PROMPT = "담당 고객 목록"
STEPS = ["initialize", "notifications/initialized", "tools/list", "tools/call"]


def ask(fault_kb, token=TOKEN, prompt=PROMPT, limit=5, **kwargs):
    registered, environ = fault_kb
    kwargs.setdefault("trust_first_use", True)
    return kb_call(registered, token, prompt, limit, environ=environ, **kwargs)


def discover(fault_kb, token=TOKEN, **kwargs):
    registered, environ = fault_kb
    kwargs.setdefault("trust_first_use", True)
    return services.kb_tools_discover(server=registered, token=token, environ=environ, **kwargs)


def rpc_methods(fault) -> list[str]:
    return [r.rpc_method for r in fault.rpc_requests()]


# --- the happy path, and what went over the wire -------------------------------------------------


def test_a_call_goes_through_the_four_steps_in_order(fault, fault_kb):
    result = ask(fault_kb)
    assert rpc_methods(fault) == STEPS
    assert result.is_error is False
    assert result.answer["row_count"] == 3 == result.row_count
    assert [row["customer_id"] for row in result.answer["rows"]] == ["C-001", "C-002", "C-003"]
    assert result.http_status == 200
    assert result.protocol_version == "2025-11-25"
    assert result.session_issued is False
    assert result.pin_state == "pinned"  # first use
    assert result.tool == KB_TOOL_NAME
    assert json.loads(result.text) == result.answer


def test_every_step_carries_the_bearer_only_in_the_authorization_header(fault, fault_kb):
    ask(fault_kb, token=f"  Bearer {TOKEN}\n")
    requests = fault.rpc_requests()
    assert [r.rpc_method for r in requests] == STEPS
    for request in requests:
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert TOKEN not in request.body.decode()
        assert "token" not in json.dumps(request.message).lower()
        assert TOKEN not in request.path
        assert request.headers["accept"] == "application/json, text/event-stream"
        assert request.headers["content-type"] == "application/json"
        assert "mcp-session-id" not in request.headers
    assert "mcp-protocol-version" not in requests[0].headers
    assert {r.headers["mcp-protocol-version"] for r in requests[1:]} == {"2025-11-25"}
    assert all(r.method == "POST" for r in fault.requests)  # stateless: no GET, no DELETE


def test_initialize_asks_for_2025_11_25_and_names_the_client(fault, fault_kb):
    ask(fault_kb)
    params = fault.rpc_requests("initialize")[0].message["params"]
    assert params["protocolVersion"] == "2025-11-25"
    assert params["clientInfo"]["name"] == "hyperbook"
    assert params["capabilities"] == {}


def test_tools_call_sends_only_prompt_and_the_clamped_limit(fault, fault_kb):
    result = ask(fault_kb, limit=1000)
    call = fault.rpc_requests("tools/call")[0].message
    assert call["params"] == {"name": KB_TOOL_NAME, "arguments": {"prompt": PROMPT, "limit": 100}}
    assert result.limit == 100
    ask(fault_kb, limit=0)
    assert fault.rpc_requests("tools/call")[1].message["params"]["arguments"]["limit"] == 1


def test_discovery_reports_the_version_the_session_and_the_tool(fault, fault_kb):
    discovery = discover(fault_kb)
    assert rpc_methods(fault) == STEPS[:3]
    assert discovery.protocol_version == "2025-11-25"
    assert discovery.session_issued is False
    assert discovery.tool_names == (KB_TOOL_NAME,)
    assert discovery.definition == pinning.canonical_tool_definition(kb_tool())
    assert discovery.pin_state == "pinned"
    assert discover(fault_kb).pin_state == "unchanged"


def test_the_request_id_of_the_call_is_the_one_sent_or_echoed(fault, fault_kb):
    result = ask(fault_kb)
    assert result.request_id == fault.rpc_requests("tools/call")[0].headers["x-request-id"]


# --- refused before any request ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"token": None}, errors.MissingToken),
        ({"token": ""}, errors.MissingToken),
        ({"token": "not a token"}, errors.MalformedBearer),
        ({"tool": "other.tool"}, errors.ToolNotAllowed),
        ({"tool": KB_TOOL_NAME.upper()}, errors.ToolNotAllowed),
        ({"prompt": ""}, errors.InvalidArguments),
        ({"prompt": "가" * 2001}, errors.InvalidArguments),
        ({"limit": "50"}, errors.InvalidArguments),
    ],
    ids=[
        "no-token",
        "empty-token",
        "malformed-token",
        "tool-not-allowed",
        "tool-case-differs",
        "empty-prompt",
        "prompt-too-long",
        "limit-not-int",
    ],
)
def test_nothing_is_sent_when_the_call_is_refused_locally(fault, fault_kb, kwargs, error):
    with pytest.raises(error) as caught:
        ask(fault_kb, **kwargs)
    assert fault.requests == []
    assert errors.to_public_mcp_error(caught.value).code == error.code


def test_discovery_without_a_token_sends_nothing(fault, fault_kb):
    with pytest.raises(errors.MissingToken):
        discover(fault_kb, token=None)
    assert fault.requests == []


def test_a_disabled_server_is_not_contacted(fault, register):
    disabled = register(kb_declaration(unique_id(), enabled=False))
    with pytest.raises(errors.ServerDisabled):
        kb_call(disabled, TOKEN, PROMPT, 5, environ={"KB_MCP_BASE_URL": fault.url})
    assert fault.requests == []


def test_an_unregistered_declaration_may_be_discovered_but_never_called(fault, committed_db):
    declaration = validate_mcp_server(kb_declaration(unique_id()))
    environ = {"KB_MCP_BASE_URL": fault.url}
    assert services.kb_tools_discover(
        server=declaration, token=TOKEN, environ=environ
    ).pin_state == ("unregistered")
    before = len(fault.requests)
    with pytest.raises(errors.ServerNotRegistered):
        kb_call(declaration, TOKEN, PROMPT, 5, environ=environ)
    assert len(fault.requests) == before


def test_a_declaration_that_differs_from_its_registration_is_not_called(fault, fault_kb):
    registered, environ = fault_kb
    widened = validate_mcp_server(
        kb_declaration(registered.server_id, description="not what was registered")
    )
    with pytest.raises(errors.ServerNotRegistered):
        kb_call(widened, TOKEN, PROMPT, 5, environ=environ)
    assert fault.requests == []


# --- HTTP statuses -------------------------------------------------------------------------------

CHALLENGE = 'Bearer realm="kb", error="invalid_token"'
SCOPE = 'Bearer realm="kb", error="insufficient_scope"'


@pytest.mark.parametrize("step", ["initialize", "tools/list", "tools/call"])
def test_401_is_token_invalid_or_expired(fault, fault_kb, step):
    fault.on(step, Reply.json({"error": "invalid_token"}, 401, {"WWW-Authenticate": CHALLENGE}))
    with pytest.raises(errors.Unauthorized) as caught:
        ask(fault_kb)
    public = errors.to_public_mcp_error(caught.value)
    assert (public.code, public.message, public.http_status) == (
        "unauthorized",
        "토큰이 유효하지 않거나 만료됨",
        401,
    )
    assert caught.value.rpc_method == step
    assert rpc_methods(fault)[-1] == step  # nothing after the refusal


def test_403_is_no_permission_for_this_user(fault, fault_kb):
    body = {"error": "insufficient_scope", "error_description": "This user may not use this tool"}
    fault.on("initialize", Reply.json(body, 403, {"WWW-Authenticate": SCOPE}))
    with pytest.raises(errors.Forbidden) as caught:
        ask(fault_kb)
    public = errors.to_public_mcp_error(caught.value)
    assert (public.message, public.http_status) == ("이 사용자에게 조회 권한 없음", 403)


@pytest.mark.parametrize(
    "reply",
    [
        Reply.json(
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": -32600, "message": "Origin not allowed"},
            },
            403,
        ),
        Reply(403, {"Content-Type": "text/plain"}, b"Invalid Origin header"),
        Reply(421, {"Content-Type": "text/plain"}, b"Invalid Host header"),
    ],
    ids=["hyperbook-gate", "sdk-origin", "sdk-host"],
)
def test_an_origin_refusal_is_a_general_error_not_a_permission_error(fault, fault_kb, reply):
    fault.on("initialize", reply)
    with pytest.raises(errors.OriginRefused) as caught:
        ask(fault_kb)
    public = errors.to_public_mcp_error(caught.value)
    assert public.code == "origin_refused"
    assert public.message == errors.GENERAL_MESSAGE
    assert "Origin" not in public.message


def test_429_says_try_again_shortly_and_is_not_retried(fault, fault_kb):
    fault.on("tools/call", Reply.json({"error": "rate_limited"}, 429, {"Retry-After": "7"}))
    with pytest.raises(errors.RateLimited) as caught:
        ask(fault_kb)
    assert caught.value.retry_after == 7
    public = errors.to_public_mcp_error(caught.value)
    assert (public.message, public.http_status, public.retryable) == (
        "잠시 후 다시 시도하세요",
        429,
        True,
    )
    assert len(fault.rpc_requests("tools/call")) == 1


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_server_error_on_tools_call_is_not_retried(fault, fault_kb, status):
    fault.on(
        "tools/call",
        Reply.json(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32603, "message": "boom"}}, status
        ),
    )
    with pytest.raises(errors.ServerError):
        ask(fault_kb)
    time.sleep(0.3)
    assert len(fault.rpc_requests("tools/call")) == 1


def test_a_slow_server_times_out_with_the_configured_timeout(fault, fault_kb):
    fault.on("initialize", lambda rec, msg: Reply.json({}, delay=3))
    started = time.monotonic()
    with pytest.raises(errors.McpTimeout) as caught:
        ask(fault_kb, timeout=0.4)
    assert time.monotonic() - started < 2.5
    assert errors.to_public_mcp_error(caught.value).code == "timeout"
    assert caught.value.request_id  # kept for the audit trail


def test_the_timeout_comes_from_settings_when_not_given(fault, fault_kb, settings):
    settings.POC3_MCP_TIMEOUT_SECONDS = 1
    registered, _ = fault_kb
    fault.on("initialize", lambda rec, msg: Reply.json({}, delay=4))
    started = time.monotonic()
    with pytest.raises(errors.McpTimeout):
        settings.KB_MCP_BASE_URL = fault.url
        kb_call(registered, TOKEN, PROMPT, 5)
    assert time.monotonic() - started < 3


def test_a_timed_out_tools_call_is_never_sent_again(fault, fault_kb):
    fault.on("tools/call", lambda rec, msg: Reply.json({}, delay=1.5))
    with pytest.raises(errors.McpTimeout) as caught:
        ask(fault_kb, timeout=0.4)
    assert caught.value.rpc_method == "tools/call"
    time.sleep(1.6)  # long enough for a retry to have arrived
    assert len(fault.rpc_requests("tools/call")) == 1


def test_an_unreachable_server_is_a_connection_failure(register, committed_db):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    registered = register(kb_declaration(unique_id()))
    with pytest.raises(errors.ConnectionFailed) as caught:
        kb_call(
            registered, TOKEN, PROMPT, 5, environ={"KB_MCP_BASE_URL": f"http://127.0.0.1:{port}"}
        )
    assert errors.to_public_mcp_error(caught.value).retryable is True


# --- redirects -----------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("step", ["initialize", "tools/call"])
def test_a_redirect_to_another_origin_is_refused_and_the_token_never_reaches_it(
    fault, fault_kb, elsewhere, status, step
):
    fault.on(step, Reply(status, {"Location": f"{elsewhere.url}/mcp"}))
    with pytest.raises(errors.RedirectRefused) as caught:
        ask(fault_kb)
    assert caught.value.http_status == status
    assert errors.to_public_mcp_error(caught.value).code == "redirect_refused"
    assert elsewhere.requests == []
    assert elsewhere.authorization_headers == []
    assert rpc_methods(fault)[-1] == step


def test_a_same_origin_redirect_is_refused_too(fault, fault_kb):
    fault.on("initialize", Reply(307, {"Location": f"{fault.url}/other-mcp"}))
    with pytest.raises(errors.RedirectRefused):
        ask(fault_kb)
    assert [r.path for r in fault.requests] == ["/mcp"]


# --- SSE -----------------------------------------------------------------------------------------


def test_answers_as_event_streams_work(fault, fault_kb):
    fault.sse = True
    result = ask(fault_kb)
    assert rpc_methods(fault) == STEPS
    assert result.row_count == 3


def test_an_event_stream_closed_early_is_resumed_with_get_not_a_second_call(fault, fault_kb):
    def tools_call(recorded, message):
        fault.pending = message["id"]
        return Reply.events([{"id": "ev-1", "retry": "100", "data": ""}])

    def resume(recorded):
        answer = {
            "jsonrpc": "2.0",
            "id": fault.pending,
            "result": fault.default_result("tools/call", {"params": {"arguments": {"limit": 2}}}),
        }
        return Reply.events([{"id": "ev-2", "data": answer}])

    fault.on("tools/call", tools_call)
    fault.get_handler = resume
    result = ask(fault_kb)
    assert result.row_count == 2
    assert len(fault.rpc_requests("tools/call")) == 1
    (get,) = [r for r in fault.requests if r.method == "GET"]
    assert get.headers["last-event-id"] == "ev-1"
    assert get.headers["authorization"] == f"Bearer {TOKEN}"
    assert get.headers["accept"] == "text/event-stream"


def test_an_event_stream_that_ends_without_an_answer_is_malformed(fault, fault_kb):
    fault.on(
        "tools/call",
        Reply.events([{"data": {"jsonrpc": "2.0", "method": "notifications/message"}}]),
    )
    with pytest.raises(errors.MalformedResponse):
        ask(fault_kb)
    assert len(fault.rpc_requests("tools/call")) == 1


# --- sessions ------------------------------------------------------------------------------------


def test_a_session_id_is_sent_after_it_is_issued_and_not_before(fault, fault_kb):
    fault.session_id = "session-4f2a"
    result = ask(fault_kb)
    assert result.session_issued is True
    posts = fault.rpc_requests()
    assert [r.rpc_method for r in posts] == STEPS
    assert "mcp-session-id" not in posts[0].headers
    assert {r.headers["mcp-session-id"] for r in posts[1:]} == {"session-4f2a"}
    # The session is ended when the client is done with it.
    (delete,) = [r for r in fault.requests if r.method == "DELETE"]
    assert delete.headers["mcp-session-id"] == "session-4f2a"
    assert delete.headers["authorization"] == f"Bearer {TOKEN}"


def test_discovery_says_whether_a_session_was_issued(fault, fault_kb):
    fault.session_id = "session-77"
    assert discover(fault_kb).session_issued is True


def test_a_session_the_server_forgot_is_reported_as_expired(fault, fault_kb):
    fault.session_id = "session-1"
    fault.on("tools/list", Reply.json({"error": "unknown session"}, 404))
    with pytest.raises(errors.SessionExpired):
        ask(fault_kb)


# --- malformed answers ---------------------------------------------------------------------------


def _answer(rpc_id, **fields) -> dict:
    return {"jsonrpc": "2.0", "id": rpc_id, **fields}


MALFORMED = {
    "not-json": lambda rec, msg: Reply(200, {"Content-Type": "application/json"}, b"{not json"),
    "html": lambda rec, msg: Reply(200, {"Content-Type": "text/html"}, b"<html></html>"),
    "no-jsonrpc": lambda rec, msg: Reply.json({"id": msg["id"], "result": {"tools": []}}),
    "wrong-id": lambda rec, msg: Reply.json(_answer(msg["id"] + 100, result={"tools": []})),
    "batch": lambda rec, msg: Reply.json([_answer(msg["id"], result={"tools": []})]),
    "result-not-object": lambda rec, msg: Reply.json(_answer(msg["id"], result=[1, 2])),
    "tools-not-list": lambda rec, msg: Reply.json(_answer(msg["id"], result={"tools": "x"})),
    "no-answer-202": lambda rec, msg: Reply(202),
    "error-without-code": lambda rec, msg: Reply.json(_answer(msg["id"], error={"message": "x"})),
}


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_a_malformed_json_rpc_answer_is_refused(fault, fault_kb, name):
    fault.on("tools/list", MALFORMED[name])
    with pytest.raises(errors.MalformedResponse) as caught:
        ask(fault_kb)
    assert errors.to_public_mcp_error(caught.value).code == "malformed_response"
    assert fault.rpc_requests("tools/call") == []


def test_a_malformed_initialize_result_is_refused(fault, fault_kb):
    fault.on(
        "initialize",
        lambda rec, msg: Reply.json(_answer(msg["id"], result={"protocolVersion": "2025-11-25"})),
    )
    with pytest.raises(errors.MalformedResponse):
        ask(fault_kb)


def test_a_json_rpc_error_to_the_call_is_reported_without_its_text(fault, fault_kb):
    fault.on(
        "tools/call",
        lambda rec, msg: Reply.json(
            _answer(msg["id"], error={"code": -32602, "message": f"bad {TOKEN}"})
        ),
    )
    with pytest.raises(errors.JsonRpcError) as caught:
        ask(fault_kb)
    assert caught.value.error_code == -32602
    assert TOKEN not in str(caught.value)
    assert TOKEN not in errors.to_public_mcp_error(caught.value).message


def test_a_tools_own_error_is_a_result_not_an_exception(fault, fault_kb):
    fault.on(
        "tools/call",
        lambda rec, msg: Reply.json(
            _answer(
                msg["id"],
                result={"content": [{"type": "text", "text": "조회 실패"}], "isError": True},
            )
        ),
    )
    result = ask(fault_kb)
    assert (result.is_error, result.text, result.answer) == (True, "조회 실패", None)


def test_structured_content_must_match_the_tools_output_schema(fault, fault_kb):
    tool = kb_tool()
    tool["outputSchema"] = {
        "type": "object",
        "required": ["rows"],
        "properties": {"rows": {"type": "array"}},
    }
    fault.tools = [tool]
    fault.on(
        "tools/call",
        lambda rec, msg: Reply.json(
            _answer(msg["id"], result={"content": [], "structuredContent": {"rows": "x"}})
        ),
    )
    with pytest.raises(errors.MalformedResponse):
        ask(fault_kb)


# --- protocol versions ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2024-11-05", "2026-07-28", "1999-01-01"])
def test_a_version_the_client_does_not_support_stops_after_initialize(fault, fault_kb, version):
    fault.protocol_version = version
    with pytest.raises(errors.ProtocolMismatch) as caught:
        ask(fault_kb)
    assert rpc_methods(fault) == ["initialize"]
    assert caught.value.version == version
    assert errors.to_public_mcp_error(caught.value).code == "protocol_mismatch"


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18"])
def test_an_older_supported_version_is_accepted_and_sent_on_later_requests(
    fault, fault_kb, version
):
    fault.protocol_version = version
    result = ask(fault_kb)
    assert result.protocol_version == version
    assert {r.headers["mcp-protocol-version"] for r in fault.rpc_requests()[1:]} == {version}


# --- the tool as listed --------------------------------------------------------------------------


def test_a_server_that_does_not_list_the_allowed_tool_is_not_called(fault, fault_kb):
    other = kb_tool()
    other["name"] = "other.tool"
    fault.tools = [other]
    with pytest.raises(errors.ToolNotOffered):
        ask(fault_kb)
    assert fault.rpc_requests("tools/call") == []


def test_a_tool_whose_schema_breaks_the_contract_is_not_called(fault, fault_kb):
    tool = kb_tool()
    tool["inputSchema"]["properties"]["user_token"] = {"type": "string"}
    tool["inputSchema"]["required"] = ["prompt", "user_token"]
    fault.tools = [tool]
    with pytest.raises(errors.ToolContractMismatch):
        ask(fault_kb)
    assert fault.rpc_requests("tools/call") == []


def test_the_tools_own_prompt_length_and_limit_bounds_apply(fault, fault_kb):
    tool = kb_tool()
    tool["inputSchema"]["properties"]["prompt"]["maxLength"] = 5
    tool["inputSchema"]["properties"]["limit"]["maximum"] = 20
    fault.tools = [tool]
    with pytest.raises(errors.InvalidArguments):
        ask(fault_kb, prompt="여섯 글자 질문")
    assert fault.rpc_requests("tools/call") == []
    ask(fault_kb, prompt="고객 목록", limit=80)
    assert fault.rpc_requests("tools/call")[0].message["params"]["arguments"]["limit"] == 20


def test_tools_list_pages_are_followed(fault, fault_kb):
    other = kb_tool()
    other["name"] = "other.tool"

    def paged(recorded, message):
        cursor = (message.get("params") or {}).get("cursor")
        tools, next_cursor = ([other], "page-2") if cursor is None else ([kb_tool()], None)
        result = {"tools": tools, **({"nextCursor": next_cursor} if next_cursor else {})}
        return Reply.json(_answer(message["id"], result=result))

    fault.on("tools/list", paged)
    discovery = discover(fault_kb)
    assert discovery.tool_names == ("other.tool", KB_TOOL_NAME)
    assert len(fault.rpc_requests("tools/list")) == 2
