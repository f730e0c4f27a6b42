import csv
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.core.management import call_command
from django.utils import timezone

from kb.models import Stakeholder
from registry.services import delegation_issue
from tests.live import live_server

PROTOCOL_VERSION = "2025-11-25"
MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": PROTOCOL_VERSION,
}
TOOL = "ords.query.kb_select_ai_vpd"


def rpc(method: str, params: dict | None = None, request_id: int = 1) -> dict:
    message = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def call(prompt: str, limit: int = 50) -> dict:
    return rpc("tools/call", {"name": TOOL, "arguments": {"prompt": prompt, "limit": limit}})


@dataclass
class World:
    """Committed demo data and delegations that a server process can see."""

    tokens: dict[str, str]  # stakeholder id -> token of an active, fully delegated token
    no_tool_token: str  # active, but delegated for another tool only
    revocable: tuple[int, str]  # (delegation id, token)
    visible_customers: dict[str, set[str]]  # stakeholder id -> customer ids, from the CSV files


@dataclass
class Server:
    url: str
    log: Path

    @property
    def mcp(self) -> str:
        return f"{self.url}/mcp"

    def post(self, body, token: str | None = None, headers: dict | None = None, **kwargs):
        all_headers = dict(MCP_HEADERS)
        if token is not None:
            all_headers["Authorization"] = f"Bearer {token}"
        all_headers.update(headers or {})
        content = body if isinstance(body, bytes | str) else None
        json_body = None if content is not None else body
        return httpx.post(
            self.mcp, json=json_body, content=content, headers=all_headers, timeout=30, **kwargs
        )


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker) -> World:
    with django_db_blocker.unblock():
        call_command("load_kb_demo", verbosity=0)
        expires = timezone.now() + timedelta(days=1)
        tokens = {}
        for stakeholder in Stakeholder.objects.all():
            _, tokens[stakeholder.stakeholder_id] = delegation_issue(
                stakeholder=stakeholder, agent_name="tests", expires_at=expires
            )
        planner = Stakeholder.objects.get(stakeholder_id="KB-P-001")
        _, no_tool_token = delegation_issue(
            stakeholder=planner, agent_name="tests", expires_at=expires, tools=["other.tool"]
        )
        revocable, revocable_token = delegation_issue(
            stakeholder=planner, agent_name="tests", expires_at=expires
        )
    return World(
        tokens=tokens,
        no_tool_token=no_tool_token,
        revocable=(revocable.pk, revocable_token),
        visible_customers=visible_customers_from_csv(),
    )


def visible_customers_from_csv() -> dict[str, set[str]]:
    """The row policy computed independently of the code under test, from the dataset files."""
    folder = Path(__file__).resolve().parents[2] / "kb" / "data" / "kb_demo"
    with open(folder / "stakeholders.csv", encoding="utf-8") as handle:
        stakeholders = list(csv.DictReader(handle))
    with open(folder / "customers.csv", encoding="utf-8") as handle:
        customers = list(csv.DictReader(handle))
    visible = {}
    for person in stakeholders:
        if person["status"] != "active":
            rows = []
        elif person["role"] == "planner":
            rows = [c for c in customers if c["planner_id"] == person["stakeholder_id"]]
        elif person["role"] == "branch_manager":
            rows = [c for c in customers if c["branch_id"] == person["branch_id"]]
        elif person["role"] == "hq_analyst":
            rows = customers
        else:
            rows = []
        visible[person["stakeholder_id"]] = {c["customer_id"] for c in rows}
    return visible


@pytest.fixture(scope="module")
def server(world, tmp_path_factory) -> Server:
    log = tmp_path_factory.mktemp("mcp-server") / "server.log"
    env = {"MCP_RATE_LIMIT": "10000/minute", "MCP_AUTH_FAILURE_LIMIT": "10000/minute"}
    with live_server(log, env) as url:
        yield Server(url=url, log=log)
