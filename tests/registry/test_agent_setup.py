"""The one-time token page hands over ready agent configuration (VS Code, Claude Desktop, the MCP
Inspector CLI), filled with this server's URL and the new token, and shown only that once. The
live tests paste what the page shows into real peers: the Inspector CLI and the official SDK."""

import asyncio
import html
import json
import re
import shlex
from datetime import timedelta
from pathlib import Path

import httpx2
import pytest
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.utils import timezone
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from registry.agent_setup import (
    CLAUDE_AUTH_VARIABLE,
    INSPECTOR_PACKAGE,
    MCP_REMOTE_PACKAGE,
    SERVER_NAME,
    VSCODE_INPUT_ID,
)
from registry.declarations import KB_TOOL_NAME

pytestmark = [pytest.mark.db]

PEERS_PACKAGE = Path(__file__).resolve().parents[1] / "peers" / "package.json"


def issue_through_the_admin(client: Client, stakeholder_id: str) -> tuple[str, str]:
    """(the one-time page's HTML, the token it shows)."""
    expires = timezone.localtime() + timedelta(days=3)
    response = client.post(
        "/admin/registry/tokendelegation/add/",
        {
            "stakeholder": stakeholder_id,
            "agent_name": "agent set-up",
            "tools": KB_TOOL_NAME,
            "expires_at_0": expires.strftime("%Y-%m-%d"),
            "expires_at_1": "12:00:00",
            "expires_at": expires.strftime("%Y-%m-%d 12:00:00"),
        },
        follow=True,
    )
    body = response.content.decode()
    assert response.status_code == 200, body[:3000]
    token = re.search(r'id="issued-token"[^>]*>([^<]+)<', body).group(1)
    return body, token


def shown(body: str, key: str) -> str:
    match = re.search(rf'<code id="setup-{key}">(.*?)</code>', body, re.S)
    assert match, f"no {key} configuration on the page"
    return html.unescape(match.group(1))


@pytest.fixture
def planner_page(admin_client):
    from django.conf import settings
    from django.core.management import call_command

    call_command("load_kb_demo", verbosity=0)
    call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE), verbosity=0)
    return lambda: issue_through_the_admin(admin_client, "KB-P-001")


@pytest.mark.django_db
@override_settings(MCP_RESOURCE_URL="https://kb.example.test/mcp")
def test_the_issued_page_fills_each_agent_with_this_servers_url_and_the_token(planner_page):
    body, token = planner_page()
    url, authorization = "https://kb.example.test/mcp", f"Bearer {token}"

    # VS Code asks for the token itself (a password prompt); the file holds none.
    vscode = json.loads(shown(body, "vscode"))
    assert vscode["servers"] == {
        SERVER_NAME: {
            "type": "http",
            "url": url,
            "headers": {"Authorization": f"Bearer ${{input:{VSCODE_INPUT_ID}}}"},
        }
    }
    assert vscode["inputs"] == [
        {
            "type": "promptString",
            "id": VSCODE_INPUT_ID,
            "description": "hyperbook VPD token KB-P-001",
            "password": True,
        }
    ]
    assert token not in shown(body, "vscode")
    # The embedded form is there only behind a warning that says why it is risky.
    embedded = re.search(
        r'<details class="embedded-token" id="embedded-vscode">(.*?)</details>', body, re.S
    )
    assert embedded and "커밋" in embedded.group(1)
    assert json.loads(shown(body, "vscode-embedded")) == {
        "servers": {
            SERVER_NAME: {"type": "http", "url": url, "headers": {"Authorization": authorization}}
        }
    }

    claude = json.loads(shown(body, "claude"))["mcpServers"][SERVER_NAME]
    assert claude["command"] == "npx"
    assert claude["args"] == [
        "-y",
        MCP_REMOTE_PACKAGE,
        url,
        "--header",
        f"Authorization:${{{CLAUDE_AUTH_VARIABLE}}}",
    ]
    assert claude["env"] == {CLAUDE_AUTH_VARIABLE: authorization}

    inspector = shlex.split(shown(body, "inspector"))
    assert inspector[:5] == ["npx", "-y", INSPECTOR_PACKAGE, "--cli", url]
    options = dict(zip(inspector[5::2], inspector[6::2], strict=True))
    assert options == {
        "--transport": "http",
        "--header": f"Authorization: {authorization}",
        "--method": "tools/list",
    }
    # Each has a copy button, worked by a script file (the CSP allows no inline script).
    for key in ("vscode", "claude", "inspector"):
        assert f'data-copy="setup-{key}"' in body
    assert re.search(r'<script src="[^"]*hyperbook/copy\.js"', body)
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", body), "an inline script"


@pytest.mark.django_db
@override_settings(MCP_RESOURCE_URL="")
def test_without_a_resource_url_the_configuration_names_the_admins_own_origin(planner_page):
    body, _ = planner_page()
    assert json.loads(shown(body, "vscode"))["servers"][SERVER_NAME]["url"] == (
        "http://testserver/mcp"
    )


@pytest.mark.django_db
def test_the_configuration_is_shown_once_and_never_again(planner_page, admin_client):
    body, token = planner_page()
    assert token in shown(body, "inspector")
    delegation_pages = (
        "/admin/registry/tokendelegation/",
        f"/admin/registry/tokendelegation/{_only_delegation_pk()}/change/",
    )
    for page in delegation_pages:
        later = admin_client.get(page).content.decode()
        assert token not in later
        assert 'id="setup-vscode"' not in later


@pytest.mark.django_db
def test_a_user_who_may_not_issue_gets_no_configuration(client):
    staff = get_user_model().objects.create_user("viewer", password="pw-viewer", is_staff=True)
    client.force_login(staff)
    response = client.get("/admin/registry/tokendelegation/add/")
    assert response.status_code == 403
    assert "setup-vscode" not in response.content.decode()


def test_the_inspector_the_page_names_is_the_one_the_peer_tests_run():
    pinned = json.loads(PEERS_PACKAGE.read_text())["dependencies"][
        "@modelcontextprotocol/inspector"
    ]
    assert INSPECTOR_PACKAGE == f"@modelcontextprotocol/inspector@{pinned}"


def _only_delegation_pk() -> int:
    from registry.models import TokenDelegation

    return TokenDelegation.objects.get(agent_name="agent set-up").pk


# --- pasted into real peers -------------------------------------------------------------------


@pytest.fixture(scope="module")
def live_page(server, world, django_db_blocker):
    """The page, as an admin of the live server's database sees it right after issuing."""
    with django_db_blocker.unblock():
        admin = get_user_model().objects.create_superuser("setup-admin", password="pw-setup-1")
        client = Client()
        client.force_login(admin)
        from django.conf import settings
        from django.core.management import call_command

        call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE), verbosity=0)
        with override_settings(MCP_RESOURCE_URL=server.mcp):
            body, token = issue_through_the_admin(client, "KB-M-001")
    yield body, token
    with django_db_blocker.unblock():
        admin.delete()


@pytest.mark.slow
def test_the_inspector_command_as_shown_lists_the_tool(live_page, tmp_path_factory):
    from tests.peers.node import peer_tools

    body, _ = live_page
    peers = peer_tools(tmp_path_factory.mktemp("peers-home"))
    command = shlex.split(shown(body, "inspector"))
    assert command[:4] == ["npx", "-y", INSPECTOR_PACKAGE, "--cli"]
    # The same package, run from the pinned install instead of npx's cache; the rest as shown,
    # plus never starting an OAuth login and asking for JSON output.
    result = peers.run(peers.inspector_cli(*command[4:], "--stored-auth-only", "--format", "json"))
    assert result.returncode == 0, result.stdout + result.stderr
    listed = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{")))
    assert [tool["name"] for tool in listed["result"]["tools"]] == [KB_TOOL_NAME]


@pytest.mark.slow
def test_the_vscode_configuration_as_shown_answers_as_its_stakeholder(live_page):
    body, token = live_page
    prompted = json.loads(shown(body, "vscode"))
    entry = prompted["servers"][SERVER_NAME]
    # What VS Code does with the input: asks for the token and puts it where the file says.
    answer = {f"${{input:{prompted['inputs'][0]['id']}}}": token}
    entry["headers"] = {
        name: re.sub(r"\$\{input:[^}]+\}", lambda m: answer[m.group(0)], value)
        for name, value in entry["headers"].items()
    }

    async def ask():
        async with httpx2.AsyncClient(headers=entry["headers"], timeout=60) as http:
            async with streamable_http_client(entry["url"], http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await session.call_tool(
                        KB_TOOL_NAME, {"prompt": "담당 고객 목록", "limit": 5}
                    )

    result = asyncio.run(ask())
    assert not result.is_error, result.content
    assert result.structured_content["stakeholder"]["id"] == "KB-M-001"
