"""A receipt for every call, against a live server with the official SDK as the client: the result's
`_meta` names the call's audit event (id and sequence, as committed) and its receipt URL; the
caller fetches the receipt with its own bearer once a checkpoint covers the event (409 with
Retry-After before), and the standalone verifier proves it; another caller gets 404, no caller
401. The receipt holds neither the question's words nor a token."""

import asyncio
import subprocess
import sys

import httpx
import httpx2
import orjson
import pytest
from django.db import connection
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from audit.checkpoints import checkpoint_create_if_due, current_signer
from audit.models import AuditEvent
from tests.live import ROOT
from tests.mcpserver.conftest import TOOL

pytestmark = [pytest.mark.db, pytest.mark.slow]

META_KEY = "io.hyperbook/audit"
PROMPT = "홍길동 고객의 VIP 여부를 알려줘"  # a name no customer has: it must not leave in a receipt


@pytest.fixture(autouse=True)
def committed(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        yield


async def call(url: str, token: str, prompt: str):
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await session.call_tool(TOOL, {"prompt": prompt, "limit": 5})


def fetch(url: str, token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(url, headers=headers, timeout=30)


def test_a_call_names_its_event_and_its_caller_proves_it(server, world, tmp_path):
    planner, manager = world.tokens["KB-P-001"], world.tokens["KB-M-001"]
    answered = asyncio.run(call(server.mcp, planner, "담당 고객 목록"))
    refused = asyncio.run(call(server.mcp, planner, PROMPT + " 청구 내역"))
    assert not answered.is_error and refused.is_error
    connection.close()
    for result in (answered, refused):
        named = result.meta[META_KEY]
        event = AuditEvent.objects.get(id=named["event_id"])
        assert event.sequence == named["sequence"]
        assert event.action == AuditEvent.Action.MCP_TOOLS_CALL
        assert named["receipt"] == f"{server.mcp}/receipts/{named['event_id']}"

    receipt_url = refused.meta[META_KEY]["receipt"]
    checkpoint_create_if_due(force=True)  # as the checkpoint worker would, a minute later at most
    fetched = fetch(receipt_url, planner)
    assert fetched.status_code == 200, fetched.text
    assert fetched.headers["content-type"] == "application/x-ndjson"
    path = tmp_path / "receipt.jsonl"
    path.write_bytes(fetched.content)
    verified = subprocess.run(
        [
            *(sys.executable, "-m", "audit.verify", str(path)),
            *("--public-key", current_signer().verifier.text()),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    lines = [orjson.loads(line) for line in fetched.content.splitlines()]
    assert lines[1]["event"]["id"] == refused.meta[META_KEY]["event_id"]
    assert lines[1]["event"]["outcome"] == "refused"
    text = fetched.content.decode()
    assert "홍길동" not in text and planner not in text and planner[:12] not in text

    # Nobody else's: another delegation, and no bearer at all.
    assert fetch(receipt_url, manager).status_code == 404
    assert fetch(receipt_url, None).status_code == 401
    assert fetch(f"{server.mcp}/receipts/not-an-event", planner).status_code == 404
    posted = httpx.post(receipt_url, headers={"Authorization": f"Bearer {planner}"}, timeout=30)
    assert posted.status_code == 405 and posted.headers["allow"] == "GET, OPTIONS"
    connection.close()
    fetched_events = AuditEvent.objects.filter(action=AuditEvent.Action.MCP_RECEIPT)
    assert {e.detail for e in fetched_events} >= {"", "receipt_unknown"}


def test_a_receipt_asked_for_before_a_checkpoint_says_when_to_come_back(server, world):
    planner = world.tokens["KB-P-002"]
    result = asyncio.run(call(server.mcp, planner, "담당 고객 목록"))
    early = fetch(result.meta[META_KEY]["receipt"], planner)
    assert early.status_code == 409 and int(early.headers["retry-after"]) > 0
    checkpoint_create_if_due(force=True)
    assert fetch(result.meta[META_KEY]["receipt"], planner).status_code == 200
