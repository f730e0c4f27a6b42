"""Server health: "Check now" discovers a server as a service check (no user's bearer ever
leaves), keeps the last result per server, audits it, and the server list shows it."""

import re

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from audit.models import AuditEvent
from core.groups import ensure_default_groups
from registry.declarations import validate_mcp_server
from registry.health import server_check
from registry.models import ServerCheck
from registry.services import server_save
from tests.registry.conftest import custom_python_declaration, kb_declaration
from tests.registry.fault_server import FaultServer, Reply, serving

pytestmark = pytest.mark.django_db


@pytest.fixture
def fault():
    with serving(FaultServer()) as app:
        yield app


def registered(mapping):
    server, _ = server_save(declaration=validate_mcp_server(mapping))
    return server


def test_a_server_that_answers_is_healthy_with_its_tool_count_and_latency(fault):
    server = registered(custom_python_declaration("rag", f"{fault.url}/mcp"))
    check = server_check(server=server)
    assert check.ok and check.tool_count == 1
    assert isinstance(check.latency_ms, int) and check.latency_ms >= 0
    assert [r.rpc_method for r in fault.rpc_requests()] == [
        "initialize",
        "notifications/initialized",
        "tools/list",
    ]
    assert all("authorization" not in r.headers for r in fault.requests)
    event = AuditEvent.objects.get(action="registry.server_checked", target="rag")
    assert event.changes["after"]["tool_count"] == 1


def test_a_server_nobody_serves_is_reported_in_words():
    server = registered(custom_python_declaration("nothing", "http://127.0.0.1:9/mcp"))
    check = server_check(server=server)
    assert not check.ok and check.tool_count is None
    assert "연결할 수 없습니다" in check.result
    # Checked again: one row per server, the latest result.
    server_check(server=server)
    assert ServerCheck.objects.filter(server=server).count() == 1


def test_the_kb_server_is_asked_without_a_bearer_and_a_challenge_is_healthy(fault, settings):
    settings.KB_MCP_BASE_URL = fault.url
    challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
    fault.on("initialize", Reply.json({"error": "unauthorized"}, status=401, headers=challenge))
    check = server_check(server=registered(kb_declaration("kb_mcp")))
    assert check.ok, check.result
    assert "VPD 토큰을 요구합니다" in check.result
    assert all("authorization" not in r.headers for r in fault.requests)


def test_a_kb_server_that_answers_without_a_token_is_not_healthy(fault, settings):
    settings.KB_MCP_BASE_URL = fault.url
    check = server_check(server=registered(kb_declaration("kb_mcp")))
    assert not check.ok and "토큰 없이 응답했습니다" in check.result


@pytest.fixture
def people():
    ensure_default_groups()
    users = {"superuser": User.objects.create_superuser("root", password="pw-for-tests")}
    for role, group in (("mcp_admin", "mcp_admins"), ("auditor", "auditors")):
        user = User.objects.create_user(role, password="pw-for-tests", is_staff=True)
        user.groups.add(Group.objects.get(name=group))
        users[role] = user
    return users


@pytest.mark.parametrize(
    ("role", "may"), [("superuser", True), ("mcp_admin", True), ("auditor", False)]
)
def test_check_now_from_the_server_page(fault, people, role, may):
    server = registered(custom_python_declaration("rag", f"{fault.url}/mcp"))
    browser = Client()
    browser.force_login(people[role])
    page = browser.get(f"/admin/registry/mcpserver/{server.pk}/change/").content.decode()
    assert ('id="check-now"' in page) == may
    response = browser.post(f"/admin/registry/mcpserver/{server.pk}/check/")
    assert response.status_code == (302 if may else 403)
    assert bool(fault.requests) == may
    listing = browser.get("/admin/registry/mcpserver/").content.decode()
    if may:
        health = re.search(r'<span class="server-health" data-ok="yes">(.*?)</span>', listing)
        assert health and "도구 1개" in health.group(1) and " ms" in health.group(1)
    else:
        assert "확인한 적 없음" in listing
