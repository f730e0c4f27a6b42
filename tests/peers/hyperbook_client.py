"""hyperbook's MCP client as a command for the conformance suite's client scenarios.

`conformance client --command "python tests/peers/hyperbook_client.py"` starts a scenario server
and runs this with its URL as the last argument and the scenario's name in
MCP_CONFORMANCE_SCENARIO. Everything goes through registry.mcp: the transport
(McpHttpSession: no redirects, JSON and SSE answers, session ids, version negotiation, stream
resumption) and the allowlist check. The scenario servers' tools are not the KB tool and take
other arguments than prompt/limit, so the product flow (registry.services.kb_tool_call, which
only ever sends prompt and limit) is not what runs here; its transport is. No token: the
scenarios need none.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from registry.declarations import McpServerDeclaration  # noqa: E402
from registry.mcp.contract import select_tool  # noqa: E402
from registry.mcp.errors import McpClientError  # noqa: E402
from registry.mcp.transport import McpHttpSession  # noqa: E402

TIMEOUT_SECONDS = 20
# What each scenario's server offers to call, and with which arguments.
SCENARIO_CALLS = {
    "initialize": None,
    "tools_call": ("add_numbers", {"a": 5, "b": 7}),
    "sse-retry": ("test_reconnection", {}),
}


def main(url: str, scenario: str) -> int:
    if scenario not in SCENARIO_CALLS:
        print(f"scenario {scenario!r} is not supported by this client", file=sys.stderr)
        return 2
    planned = SCENARIO_CALLS[scenario]
    allowed = (planned[0],) if planned else ()
    declaration = McpServerDeclaration(
        id="conformance",
        provider="custom_python",
        endpoint_url=url,
        auth_delivery="none",
        default_tool=allowed[0] if allowed else "",
        tool_allowlist=allowed,
    )
    with McpHttpSession(url, token=None, timeout=TIMEOUT_SECONDS) as session:
        initialized = session.initialize()
        print(f"initialized: protocol {initialized.protocol_version}, session {session.session_id}")
        session.notify_initialized()
        tools = session.list_tools()
        print(f"tools: {[tool.get('name') for tool in tools]}")
        if planned is None:
            return 0
        name = select_tool(declaration, planned[0])
        if name not in {tool.get("name") for tool in tools}:
            print(f"the server does not list {name}", file=sys.stderr)
            return 1
        result = session.call_tool(name, planned[1])
        print(f"called {name}: {result}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
    except McpClientError as exc:
        print(f"client error: {exc.code} ({exc})", file=sys.stderr)
        sys.exit(1)
