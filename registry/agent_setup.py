"""Ready-to-paste agent configuration for a newly issued token: VS Code (which asks for the token
itself), Claude Desktop and the MCP Inspector CLI, each filled with this server's /mcp URL.

Built only for the one-time page that shows the token; nothing here is stored or logged.
"""

import json
import shlex
from dataclasses import dataclass

from django.conf import settings
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _

SERVER_NAME = "hyperbook-kb"
# Pinned: the 0.x line, which a plain `npx` picks on Node 20, has no --header.
INSPECTOR_PACKAGE = "@modelcontextprotocol/inspector@2.12.0"
# Claude Desktop starts local (stdio) servers only; mcp-remote bridges it to Streamable HTTP.
MCP_REMOTE_PACKAGE = "mcp-remote@0.15.1"
# mcp-remote's documented form: the header's value comes from the environment, and no space
# after the colon, which some launchers would split into two arguments.
CLAUDE_AUTH_VARIABLE = "HYPERBOOK_AUTHORIZATION"


# VS Code asks for the token when it starts the server and keeps it in its secret storage.
VSCODE_INPUT_ID = "hyperbook-token"


@dataclass(frozen=True)
class AgentSetup:
    key: str
    title: str
    where: str | Promise  # a lazily translated sentence
    text: str
    # The same set-up with the token written into the file, offered only behind a warning.
    embedded: str = ""


def mcp_url_for(request) -> str:
    """This server's /mcp as agents reach it: MCP_RESOURCE_URL, else the admin's own origin."""
    return settings.MCP_RESOURCE_URL or request.build_absolute_uri("/mcp")


def agent_setups(*, url: str, token: str, stakeholder_id: str = "") -> list[AgentSetup]:
    authorization = f"Bearer {token}"
    vscode_prompted = {
        "inputs": [
            {
                "type": "promptString",
                "id": VSCODE_INPUT_ID,
                "description": f"hyperbook VPD token {stakeholder_id}".strip(),
                "password": True,
            }
        ],
        "servers": {
            SERVER_NAME: {
                "type": "http",
                "url": url,
                "headers": {"Authorization": f"Bearer ${{input:{VSCODE_INPUT_ID}}}"},
            }
        },
    }
    vscode_embedded = {
        "servers": {
            SERVER_NAME: {"type": "http", "url": url, "headers": {"Authorization": authorization}}
        }
    }
    claude = {
        "mcpServers": {
            SERVER_NAME: {
                "command": "npx",
                "args": [
                    "-y",
                    MCP_REMOTE_PACKAGE,
                    url,
                    "--header",
                    f"Authorization:${{{CLAUDE_AUTH_VARIABLE}}}",
                ],
                "env": {CLAUDE_AUTH_VARIABLE: authorization},
            }
        }
    }
    inspector = shlex.join(
        [
            "npx",
            "-y",
            INSPECTOR_PACKAGE,
            "--cli",
            url,
            "--transport",
            "http",
            "--header",
            f"Authorization: {authorization}",
            "--method",
            "tools/list",
        ]
    )
    return [
        AgentSetup(
            "vscode",
            "VS Code",
            _(
                ".vscode/mcp.json (작업 공간) 또는 사용자 mcp.json: VS Code가 서버를 시작할 때 "
                "토큰을 묻고 비밀 저장소에 보관합니다. 파일에는 토큰이 들어가지 않습니다."
            ),
            _json(vscode_prompted),
            embedded=_json(vscode_embedded),
        ),
        AgentSetup(
            "claude",
            "Claude Desktop",
            _("claude_desktop_config.json (Node.js 18 이상 필요)"),
            _json(claude),
        ),
        AgentSetup(
            "inspector",
            "MCP Inspector CLI",
            _("터미널 (Node.js 22.19 이상): 도구 목록을 받아 연결을 확인합니다"),
            inspector,
        ),
    ]


def _json(value: dict) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)
