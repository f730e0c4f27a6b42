"""The admin index's dashboard: each figure is right, and its link lists exactly what it counts."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import audit_events_append
from core.groups import ensure_default_groups
from kb.models import Branch, Stakeholder
from registry.declarations import validate_mcp_server
from registry.health import server_check
from registry.services import delegation_issue, server_save
from tests.registry.conftest import custom_python_declaration

pytestmark = pytest.mark.django_db

Outcome = AuditEvent.Outcome


@pytest.fixture
def world():
    now = timezone.now()
    midnight = timezone.localtime().replace(hour=0, minute=0, second=0, microsecond=0)

    def call(outcome, at, n):
        return [
            {
                "action": AuditEvent.Action.MCP_TOOLS_CALL,
                "outcome": outcome,
                "detail": "" if outcome == Outcome.ALLOWED else "stakeholder_not_permitted",
                "request_id": f"dash-{outcome}-{at.isoformat()}-{i}",
                "occurred_at": at,
            }
            for i in range(n)
        ]

    audit_events_append(
        events=[
            *call(Outcome.ALLOWED, max(midnight, now - timedelta(minutes=5)), 3),
            *call(Outcome.FORBIDDEN, max(midnight, now - timedelta(minutes=4)), 2),
            *call(Outcome.ALLOWED, midnight - timedelta(hours=2), 4),  # yesterday
        ]
    )
    branch = Branch.objects.create(branch_id="BR-GN", branch_name="강남지점", region="서울")
    planner = Stakeholder.objects.create(
        stakeholder_id="KB-P-001", name="윤지유", role="planner", branch=branch
    )
    delegation_issue(stakeholder=planner, agent_name="soon", expires_at=now + timedelta(days=3))
    delegation_issue(stakeholder=planner, agent_name="later", expires_at=now + timedelta(days=30))
    server, _ = server_save(
        declaration=validate_mcp_server(
            custom_python_declaration("nothing", "http://127.0.0.1:9/mcp")
        )
    )
    server_check(server=server)


@pytest.fixture(params=["superuser", "mcp_admins", "auditors"])
def browser(request):
    ensure_default_groups()
    if request.param == "superuser":
        user = User.objects.create_superuser("dash", password="pw-for-tests")
    else:
        user = User.objects.create_user("dash", password="pw-for-tests", is_staff=True)
        user.groups.add(Group.objects.get(name=request.param))
    client = Client()
    client.force_login(user)
    return client


def figures(body: str) -> dict[str, tuple[str, str]]:
    return {
        key: (url.replace("&amp;", "&"), value)
        for key, url, value in re.findall(
            r'data-figure="([^"]+)">\s*<a href="([^"]+)"><span class="figure-value">([^<]+)</span>',
            body,
        )
    }


def rows_listed(client, url: str) -> int:
    body = client.get(url).content.decode()
    table = re.search(r'<table id="result_list">(.*?)</table>', body, re.S)
    return len(re.findall(r"<tr>", table.group(1).split("</thead>")[1])) if table else 0


def test_every_figure_links_to_the_list_it_counts(world, browser, settings):
    settings.EGS2_MEMORY_API_URL = ""
    body = browser.get("/admin/").content.decode()
    shown = figures(body)
    assert shown["calls"][1] == "5" and shown["refusals"][1] == "2"
    assert shown["expiring"][1] == "1"
    assert shown["delivery"][1].startswith("꺼짐")
    for key in ("calls", "refusals", "expiring"):
        url, value = shown[key]
        assert rows_listed(browser, url) == int(value), key
    servers = re.search(r'<tr data-server="nothing">(.*?)</tr>', body, re.S).group(1)
    assert "연결할 수 없습니다" in servers and "icon-no.svg" in servers


def test_with_a_memory_api_the_delivery_figure_counts_what_is_pending(world, browser, settings):
    settings.EGS2_MEMORY_API_URL = "https://memory.example.test/api"
    shown = figures(browser.get("/admin/").content.decode())
    assert "delivery" in shown and "delivery-failing" in shown
    assert shown["delivery"][0].endswith("delivery_state=pending")
