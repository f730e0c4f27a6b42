"""The MCP client's pure helpers: headers, arguments, schema check, hashes, versions, messages."""

import pytest

from mcpserver import tool as served_tool
from registry import pinning, services
from registry.declarations import KB_TOOL_NAME, EndpointError, validate_mcp_server
from registry.mcp import contract, errors, transport
from registry.tokens import MalformedToken
from tests.registry.conftest import custom_python_declaration, kb_declaration, vector_declaration
from tests.registry.fault_server import kb_tool

TOKEN = "hbvpd_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
KB = validate_mcp_server(kb_declaration())
RAG = validate_mcp_server(custom_python_declaration())
VECTOR = validate_mcp_server(vector_declaration())


# --- headers -------------------------------------------------------------------------------------


def test_headers_before_initialize_carry_no_version_and_no_session():
    assert transport.mcp_headers(TOKEN) == {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Authorization": f"Bearer {TOKEN}",
    }


def test_headers_after_initialize_carry_the_negotiated_version_and_an_issued_session():
    headers = transport.mcp_headers(TOKEN, "2025-06-18", "sess-1")
    assert headers["MCP-Protocol-Version"] == "2025-06-18"
    assert headers["Mcp-Session-Id"] == "sess-1"
    assert "Mcp-Session-Id" not in transport.mcp_headers(TOKEN, "2025-06-18", None)


@pytest.mark.parametrize("raw", [f"  {TOKEN}\n", f"Bearer {TOKEN}", f"bearer   {TOKEN} "])
def test_the_token_is_normalised_before_it_goes_in_the_header(raw):
    assert transport.mcp_headers(raw)["Authorization"] == f"Bearer {TOKEN}"


def test_a_malformed_token_is_refused_without_repeating_it():
    with pytest.raises(MalformedToken) as caught:
        transport.mcp_headers("not a token; drop table")
    assert "drop table" not in str(caught.value)


def test_a_session_id_outside_visible_ascii_is_refused():
    with pytest.raises(errors.MalformedResponse):
        transport.mcp_headers(TOKEN, "2025-11-25", "bad id\n")


def test_a_server_without_authentication_gets_no_authorization_header():
    assert "Authorization" not in transport.mcp_headers(None, "2025-11-25")


# --- which token goes where ----------------------------------------------------------------------


def test_the_kb_server_needs_the_users_token():
    with pytest.raises(errors.MissingToken):
        services.bearer_for(KB, None)
    with pytest.raises(errors.MissingToken):
        services.bearer_for(KB, "   ")
    with pytest.raises(errors.MalformedBearer):
        services.bearer_for(KB, "short")
    assert services.bearer_for(KB, f"Bearer {TOKEN}") == TOKEN


def test_a_no_auth_server_never_receives_the_users_token():
    assert services.bearer_for(RAG, TOKEN) is None


def test_a_service_token_server_gets_its_own_token_from_the_environment(monkeypatch):
    monkeypatch.delenv("KB_VECTOR_MCP_TOKEN", raising=False)
    with pytest.raises(errors.MissingToken):
        services.bearer_for(VECTOR, TOKEN)
    monkeypatch.setenv("KB_VECTOR_MCP_TOKEN", "service-token-0123456789abcdef")
    assert services.bearer_for(VECTOR, TOKEN) == "service-token-0123456789abcdef"


# --- tool, prompt, limit -------------------------------------------------------------------------


def test_a_direct_server_chooses_its_one_allowed_tool_without_a_router():
    assert contract.select_tool(KB) == KB_TOOL_NAME


@pytest.mark.parametrize(
    "name",
    [
        "ords.query.kb_select_ai_vpd ",
        "ORDS.query.kb_select_ai_vpd",
        "ords.query.kb_select_ai",
        "other.tool",
        "",
    ],
)
def test_only_the_exact_allowlisted_name_may_be_called(name):
    with pytest.raises(errors.ToolNotAllowed):
        contract.select_tool(KB, name)


@pytest.mark.parametrize(
    ("given", "sent"), [(0, 1), (-5, 1), (1, 1), (50, 50), (100, 100), (101, 100)]
)
def test_the_limit_is_clamped_to_1_100(given, sent):
    assert contract.clamp_limit(given) == sent


def test_the_limit_also_respects_a_tools_narrower_bounds():
    assert contract.clamp_limit(80, minimum=1, maximum=20) == 20


@pytest.mark.parametrize("limit", [True, "5", 5.0, None])
def test_a_limit_that_is_not_an_integer_is_refused(limit):
    with pytest.raises(errors.InvalidArguments):
        contract.clamp_limit(limit)


@pytest.mark.parametrize("prompt", ["", "   ", None, 42, "가" * 2001])
def test_a_prompt_must_be_a_nonblank_string_within_the_maximum_length(prompt):
    with pytest.raises(errors.InvalidArguments):
        contract.checked_prompt(prompt, max_length=2000)


def test_the_arguments_are_only_prompt_and_limit():
    assert contract.tool_arguments("질문", 5) == {"prompt": "질문", "limit": 5}


# --- the tool's schema ---------------------------------------------------------------------------


def test_our_own_tools_schema_matches_the_contract(settings):
    definition = {"name": KB_TOOL_NAME, "inputSchema": served_tool.input_schema()}
    contract.check_input_schema(definition)
    assert contract.schema_bounds(definition) == (settings.MCP_PROMPT_MAX_LENGTH, 1, 100)


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s.update(type="array"),
        lambda s: s["properties"].pop("prompt"),
        lambda s: s["properties"]["prompt"].update(type="integer"),
        lambda s: s["properties"]["limit"].update(type="number"),
        lambda s: s["properties"].pop("limit"),
        lambda s: s.update(required=["prompt", "user_token"]),
        lambda s: s.update(required="prompt"),
    ],
    ids=[
        "not-object",
        "no-prompt",
        "prompt-not-string",
        "limit-not-integer",
        "no-limit",
        "extra-required",
        "required-not-list",
    ],
)
def test_a_schema_that_breaks_the_contract_is_refused(change):
    definition = kb_tool()
    change(definition["inputSchema"])
    with pytest.raises(errors.ToolContractMismatch):
        contract.check_input_schema(definition)


# --- pinning hashes ------------------------------------------------------------------------------


def test_the_definition_hash_ignores_key_order():
    definition = kb_tool()
    reordered = dict(reversed(list(definition.items())))
    reordered["inputSchema"] = dict(reversed(list(definition["inputSchema"].items())))
    assert pinning.tool_definition_hash(reordered) == pinning.tool_definition_hash(definition)


@pytest.mark.parametrize(
    "field",
    ["description", "inputSchema", "outputSchema", "annotations", "title", "_meta", "icons"],
)
def test_the_definition_hash_changes_with_any_field_a_client_shows_or_acts_on(field):
    changed = kb_tool()
    changed[field] = {"changed": True} if field != "title" else "DELETE EVERYTHING"
    assert pinning.tool_definition_hash(changed) != pinning.tool_definition_hash(kb_tool())


def test_the_canonical_definition_is_the_whole_definition():
    definition = {**kb_tool(), "title": "KB", "_meta": {"vendor/x": 1}}
    assert pinning.canonical_tool_definition(definition) == definition


# --- protocol versions ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18", "2025-11-25"])
def test_every_supported_version_the_server_answers_is_accepted(version):
    assert transport.negotiated_version({"protocolVersion": version}) == version


@pytest.mark.parametrize("version", ["2024-11-05", "2026-07-28", "9999-99-99", "", None, 20251125])
def test_any_other_version_is_refused(version):
    with pytest.raises(errors.ProtocolMismatch):
        transport.negotiated_version({"protocolVersion": version})


# --- endpoint and timeout ------------------------------------------------------------------------


def test_the_kb_url_comes_from_kb_mcp_base_url_only(settings):
    settings.KB_MCP_BASE_URL = "https://kb.example.com/"
    assert services.resolve_endpoint(KB) == "https://kb.example.com/mcp"
    assert services.resolve_endpoint(KB, {"KB_MCP_BASE_URL": "http://127.0.0.1:9"}) == (
        "http://127.0.0.1:9/mcp"
    )


def test_an_unset_or_unsafe_kb_url_is_refused_before_any_request(settings):
    settings.KB_MCP_BASE_URL = ""
    with pytest.raises(errors.EndpointUnavailable):
        services.resolve_endpoint(KB, {})
    with pytest.raises(errors.EndpointUnavailable):
        services.resolve_endpoint(KB, {"KB_MCP_BASE_URL": "http://kb.example.com"})


def test_the_timeout_comes_from_settings_and_may_only_be_lowered(settings):
    settings.POC3_MCP_TIMEOUT_SECONDS = 30
    assert services.effective_timeout(KB) == 30
    lowered = validate_mcp_server(kb_declaration(timeout_seconds=5))
    assert services.effective_timeout(lowered) == 5
    raised = validate_mcp_server(kb_declaration(timeout_seconds=300))
    assert services.effective_timeout(raised) == 30
    assert services.effective_timeout(KB, timeout=0.5) == 0.5
    assert services.effective_timeout(KB, timeout=500) == 30


# --- public messages -----------------------------------------------------------------------------

SECRET_LOOKING = f"server said: Bearer {TOKEN} at https://internal.example/mcp"


@pytest.mark.parametrize(
    ("error", "code", "message"),
    [
        (
            errors.Unauthorized(SECRET_LOOKING, http_status=401),
            "unauthorized",
            "토큰이 유효하지 않거나 만료됨",
        ),
        (
            errors.Forbidden(SECRET_LOOKING, http_status=403),
            "forbidden",
            "이 사용자에게 조회 권한 없음",
        ),
        (
            errors.RateLimited(SECRET_LOOKING, http_status=429),
            "rate_limited",
            "잠시 후 다시 시도하세요",
        ),
        (
            errors.OriginRefused(SECRET_LOOKING, http_status=403),
            "origin_refused",
            errors.GENERAL_MESSAGE,
        ),
        (errors.McpTimeout(SECRET_LOOKING), "timeout", None),
        (errors.RedirectRefused(SECRET_LOOKING, http_status=307), "redirect_refused", None),
        (errors.MalformedResponse(SECRET_LOOKING), "malformed_response", None),
        (errors.ProtocolMismatch(SECRET_LOOKING), "protocol_mismatch", None),
        (errors.ConnectionFailed(SECRET_LOOKING), "connection_failed", None),
        (errors.ToolNotAllowed(SECRET_LOOKING), "tool_not_allowed", None),
        (errors.ToolDefinitionChanged(SECRET_LOOKING), "tool_held", None),
        (errors.MissingToken(SECRET_LOOKING), "missing_token", None),
        (errors.JsonRpcError(SECRET_LOOKING, error_code=-32603), "rpc_error", None),
        (EndpointError(SECRET_LOOKING), "endpoint_unavailable", None),
        (MalformedToken(SECRET_LOOKING), "malformed_token", None),
        (RuntimeError(SECRET_LOOKING), "error", errors.GENERAL_MESSAGE),
    ],
)
def test_every_failure_has_a_safe_korean_message(error, code, message):
    public = errors.to_public_mcp_error(error)
    assert public.code == code
    if message is not None:
        assert public.message == message
    assert TOKEN not in public.message
    assert "internal.example" not in public.message
    assert "server said" not in public.message
    assert any("\uac00" <= ch <= "\ud7a3" for ch in public.message)  # Korean


def test_the_public_error_keeps_the_http_status_and_says_when_trying_again_may_help():
    assert errors.to_public_mcp_error(errors.Unauthorized(http_status=401)) == (
        errors.PublicMcpError("unauthorized", "토큰이 유효하지 않거나 만료됨", 401, False)
    )
    assert errors.to_public_mcp_error(errors.RateLimited(http_status=429)).retryable is True
    assert errors.to_public_mcp_error(errors.Forbidden(http_status=403)).retryable is False


def test_every_error_code_has_a_public_message():
    codes = {
        cls.code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.McpClientError)
    }
    assert codes <= set(errors.PUBLIC_MESSAGES)
