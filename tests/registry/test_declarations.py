import pytest

from registry.declarations import (
    DeclarationError,
    EndpointError,
    McpServerDeclaration,
    resolve_kb_mcp_endpoint,
    validate_kb_mcp_server,
    validate_mcp_server,
)
from tests.registry.conftest import custom_python_declaration, kb_declaration, vector_declaration


def kb_endpoint(base_url: str) -> str:
    return resolve_kb_mcp_endpoint(
        validate_kb_mcp_server(kb_declaration()), {"KB_MCP_BASE_URL": base_url}
    )


def error_fields(exc: DeclarationError) -> set[str]:
    return {error.field for error in exc.errors}


def test_the_seed_kb_declaration_is_valid():
    declaration = validate_kb_mcp_server(kb_declaration())
    assert declaration.is_kb
    assert declaration.tool_allowlist == ("ords.query.kb_select_ai_vpd",)
    assert declaration.as_mapping() == kb_declaration()


def test_the_base_url_alone_gives_the_kb_endpoint():
    assert kb_endpoint("https://kb.cloud-handson.com") == "https://kb.cloud-handson.com/mcp"


@pytest.mark.parametrize(
    ("base_url", "endpoint"),
    [
        ("https://kb.cloud-handson.com/", "https://kb.cloud-handson.com/mcp"),
        ("https://kb.cloud-handson.com///", "https://kb.cloud-handson.com/mcp"),
        ("https://h/prefix", "https://h/prefix/mcp"),
        ("https://h/prefix/", "https://h/prefix/mcp"),
        ("https://h:8443/a/b", "https://h:8443/a/b/mcp"),
        ("  https://h  ", "https://h/mcp"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000/mcp"),
        ("http://localhost:8000/", "http://localhost:8000/mcp"),
        ("http://[::1]:8000", "http://[::1]:8000/mcp"),
    ],
)
def test_the_base_url_is_normalised_and_keeps_its_path(base_url, endpoint):
    assert kb_endpoint(base_url) == endpoint


@pytest.mark.parametrize(
    ("base_url", "reason"),
    [
        ("https://evil@h", "user information"),
        ("https://user:pass@h", "user information"),
        ("http://h", "https"),
        ("http://kb.cloud-handson.com", "https"),
        ("http://10.0.0.1", "https"),
        ("h/mcp?x", "query"),
        ("https://h/?x=1", "query"),
        ("https://h/#frag", "fragment"),
        ("ftp://h", "https"),
        ("javascript:alert(1)", "https"),
        ("https://", "host"),
        ("https://h/../admin", ".."),
        ("https://h:99999", "valid URL"),
        ("https://h\\@evil", "backslash"),
        ("https://h/\nx", "control"),
        ("https://h/mcp", "without /mcp"),
    ],
)
def test_hostile_or_wrong_base_urls_are_refused(base_url, reason):
    with pytest.raises(EndpointError, match=reason):
        kb_endpoint(base_url)


def test_an_unset_base_url_is_refused_by_name():
    with pytest.raises(EndpointError, match="KB_MCP_BASE_URL is not set"):
        resolve_kb_mcp_endpoint(validate_kb_mcp_server(kb_declaration()), {})


def test_a_refused_url_does_not_echo_its_credentials():
    with pytest.raises(EndpointError) as raised:
        kb_endpoint("https://admin:s3cret-canary@h")
    assert "s3cret-canary" not in str(raised.value)


@pytest.mark.parametrize(
    "forbidden",
    ["endpoint_url", "token_env", "POC3_MCP_TOKEN", "BACKOFFICE_MCP_ACCESS_TOKEN"],
)
def test_a_kb_declaration_carrying_a_url_or_token_fails_closed(forbidden):
    with pytest.raises(DeclarationError) as raised:
        validate_kb_mcp_server(kb_declaration(**{forbidden: "https://elsewhere/mcp"}))
    assert forbidden in error_fields(raised.value)
    assert forbidden in str(raised.value)


def test_a_kb_declaration_with_the_custom_python_provider_fails_closed():
    with pytest.raises(DeclarationError) as raised:
        validate_mcp_server(kb_declaration(provider="custom_python"))
    assert "provider" in error_fields(raised.value)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"transport": "sse"}, "transport"),
        ({"transport": "stdio"}, "transport"),
        ({"tool_allowlist": []}, "tool_allowlist"),
        ({"default_tool": "other.tool"}, "default_tool"),
        ({"tool_allowlist": ["bad name!"]}, "tool_allowlist"),
        ({"tool_allowlist": ["x" * 129], "default_tool": "x" * 129}, "tool_allowlist"),
        ({"endpoint_path": "/other"}, "endpoint_path"),
        ({"router_mode": "magic"}, "router_mode"),
        ({"id": "Bad Id"}, "id"),
        ({"unexpected": 1}, "unexpected"),
    ],
)
def test_a_broken_kb_declaration_names_the_field(changes, field):
    with pytest.raises(DeclarationError) as raised:
        validate_kb_mcp_server(kb_declaration(**changes))
    assert field in error_fields(raised.value)


def test_tool_names_follow_the_mcp_naming_rule():
    longest = "a" * 128
    declaration = validate_kb_mcp_server(
        kb_declaration(tool_allowlist=[longest], default_tool=longest)
    )
    assert declaration.default_tool == longest


def test_the_vector_declaration_loads_in_its_existing_format():
    declaration = validate_mcp_server(vector_declaration())
    assert isinstance(declaration, McpServerDeclaration)
    assert declaration.token_env == "KB_VECTOR_MCP_TOKEN"
    assert resolve_kb_mcp_endpoint(declaration, {}) == "http://127.0.0.1:8600/mcp"


def test_the_custom_python_declaration_on_port_8500_still_loads():
    declaration = validate_mcp_server(custom_python_declaration())
    assert declaration.provider == "custom_python"
    assert resolve_kb_mcp_endpoint(declaration, {}) == "http://127.0.0.1:8500/mcp"


def test_a_legacy_token_env_must_be_a_variable_name_not_a_token_value():
    with pytest.raises(DeclarationError) as raised:
        validate_mcp_server(vector_declaration(token_env="vpd_live_abc.def"))
    assert "token_env" in error_fields(raised.value)
    assert "vpd_live_abc" not in str(raised.value)


def test_a_legacy_endpoint_url_must_be_https_unless_loopback():
    with pytest.raises(DeclarationError) as raised:
        validate_mcp_server(vector_declaration(endpoint_url="http://vector.example/mcp"))
    assert "endpoint_url" in error_fields(raised.value)


def test_a_row_that_is_not_an_object_is_refused():
    with pytest.raises(DeclarationError):
        validate_mcp_server(["kb_mcp"])
