"""Bounded fuzzing of /mcp request bodies and headers: never a 5xx, never a traceback."""

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.mcpserver.conftest import MCP_HEADERS, TOOL

pytestmark = [pytest.mark.db, pytest.mark.slow]

FUZZ = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,  # the same inputs on every run: a failure here is reproducible
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
methods = st.sampled_from(
    ["initialize", "tools/list", "tools/call", "ping", "resources/list", "nope", "", None]
)
messages = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0", None]), "method": methods},
    optional={
        "id": st.one_of(st.integers(), st.text(max_size=8), st.none()),
        "params": st.one_of(
            json_values,
            st.fixed_dictionaries(
                {"name": st.sampled_from([TOOL, "x", ""]), "arguments": json_values}
            ),
            st.fixed_dictionaries(
                {
                    "name": st.just(TOOL),
                    "arguments": st.fixed_dictionaries(
                        {"prompt": st.text(max_size=300), "limit": json_values}
                    ),
                }
            ),
        ),
    },
)
# Visible ASCII and spaces; a value's leading and trailing spaces are not part of it in HTTP (the
# client refuses to send them), so they are stripped here rather than left to fail the client.
header_text = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60
).map(str.strip)


def assert_handled(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text[:500]
    assert "Traceback" not in response.text
    assert response.headers.get("x-request-id")


@FUZZ
@given(message=messages)
def test_fuzzed_jsonrpc_messages_are_answered_without_server_errors(server, world, message):
    response = server.post(json.dumps(message), world.tokens["KB-H-001"])
    assert_handled(response)


@FUZZ
@given(body=st.binary(max_size=400))
def test_fuzzed_raw_bodies_are_answered_without_server_errors(server, world, body):
    assert_handled(server.post(body, world.tokens["KB-H-001"]))


@FUZZ
@given(
    version=header_text,
    accept=header_text,
    content_type=header_text,
    authorization=header_text,
    origin=st.one_of(st.none(), header_text),
)
def test_fuzzed_headers_are_answered_without_server_errors(
    server, world, version, accept, content_type, authorization, origin
):
    headers = {
        **MCP_HEADERS,
        "MCP-Protocol-Version": version,
        "Accept": accept,
        "Content-Type": content_type,
        "Authorization": authorization,
    }
    if origin is not None:
        headers["Origin"] = origin
    response = httpx.post(
        server.mcp,
        content=b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
        headers=headers,
        timeout=30,
    )
    assert_handled(response)
