"""Our MCP client under the official conformance suite's client scenarios.

The suite (pinned in tests/peers) starts each scenario's server and runs
tests/peers/hyperbook_client.py against it, which goes through registry.mcp.

Run: initialize, tools_call, sse-retry (a POST's event stream closed early must be resumed with
GET + Last-Event-ID after the server's retry delay; the tools/call is not sent again).
Not run, on purpose:
- elicitation-sep1034-client-defaults: our client declares no elicitation capability (a KB
  question is never answered by asking the user mid-call), so the scenario's tool cannot work;
- auth/*: OAuth 2.1 flows (metadata discovery, dynamic/pre-registration, token endpoints,
  scopes). hyperbook uses a pre-issued per-user VPD bearer sent as is, not OAuth.
"""

import json
import re
import sys
from pathlib import Path

import pytest

from tests.peers.node import PEERS_DIR, PeerTools, peer_tools

# Network only: marked db too, so the PostgreSQL run (-m db) includes it.
pytestmark = [pytest.mark.db, pytest.mark.slow]

CLIENT = PEERS_DIR / "hyperbook_client.py"
RUN = ["initialize", "tools_call", "sse-retry"]
NOT_APPLICABLE = {
    "elicitation-sep1034-client-defaults": "the client declares no elicitation capability",
}


@pytest.fixture(scope="module")
def peers(tmp_path_factory) -> PeerTools:
    return peer_tools(tmp_path_factory.mktemp("peers-home"))


def client_scenarios(peers: PeerTools) -> list[str]:
    listing = peers.run(peers.conformance("list")).stdout
    section = listing.split("Client scenarios", 1)[1]
    return re.findall(r"^\s*-\s*(\S+)", section, re.MULTILINE)


def run_scenario(peers: PeerTools, scenario: str, output_dir: Path) -> tuple[list[dict], str]:
    command = f"{sys.executable} {CLIENT}"
    result = peers.run(
        peers.conformance(
            "client",
            "--command",
            command,
            "--scenario",
            scenario,
            "--timeout",
            "60000",
            "--output-dir",
            str(output_dir),
        ),
        timeout=120,
    )
    files = list(output_dir.glob("**/checks.json"))
    output = f"{result.stdout}\n{result.stderr}"
    assert len(files) == 1, f"no checks written:\n{output[-4000:]}"
    checks = json.loads(files[0].read_text())
    assert result.returncode == 0, f"{scenario} failed:\n{output[-4000:]}"
    return checks, output


def test_every_client_scenario_is_either_run_or_explained(peers):
    scenarios = client_scenarios(peers)
    assert set(RUN) <= set(scenarios)
    unexplained = [
        name
        for name in scenarios
        if name not in RUN and name not in NOT_APPLICABLE and not name.startswith("auth/")  # OAuth
    ]
    assert unexplained == [], f"new client scenarios to consider: {unexplained}"


@pytest.mark.parametrize("scenario", RUN)
def test_the_client_passes_the_conformance_scenario(peers, scenario, tmp_path):
    checks, output = run_scenario(peers, scenario, tmp_path)
    decisive = [check for check in checks if check["status"] in ("SUCCESS", "FAILURE", "WARNING")]
    assert decisive, f"{scenario} ran no checks:\n{output[-2000:]}"
    failed = [check for check in decisive if check["status"] != "SUCCESS"]
    assert failed == [], json.dumps(failed, ensure_ascii=False, indent=1)[:4000]
