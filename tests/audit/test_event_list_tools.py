"""The event list an auditor works with: free-text search (action, reason by code or name, tool,
client request id), the export of the list as filtered (each event proven on its own,
each event's hash recomputable, the export audited), and the event page's links."""

import re

import orjson
import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from audit.chain import event_hash
from audit.models import AuditEvent
from audit.services import audit_events_append
from audit.verify import BUNDLE_TYPE, PROOF_TYPE
from core.groups import ensure_default_groups

pytestmark = pytest.mark.django_db

CANARY = "hbvpd_CanaryTokenThatMustNeverBeExported0123456789"


@pytest.fixture
def canary_delegation():
    """A delegation registered with the canary token: its events are in the log, never it."""
    from datetime import timedelta

    from kb.models import Branch, Stakeholder
    from registry.services import delegation_register

    branch = Branch.objects.create(branch_id="BR-GN", branch_name="강남지점", region="서울")
    planner = Stakeholder.objects.create(
        stakeholder_id="KB-P-001", name="윤지유", role="planner", branch=branch
    )
    return delegation_register(
        raw_token=CANARY,
        stakeholder=planner,
        agent_name="canary",
        expires_at=timezone.now() + timedelta(days=1),
    )


@pytest.fixture
def events():
    now = timezone.now()

    def event(i, outcome, detail="", tool="", client_request_id=None, request_id=None):
        return {
            "action": AuditEvent.Action.MCP_TOOLS_CALL,
            "outcome": outcome,
            "detail": detail,
            "tool": tool,
            "client_request_id": client_request_id,
            "request_id": request_id or f"req-tools-{i}",
            "delegation_id": 7,
            "stakeholder_id": "KB-P-001",
            "occurred_at": now,
        }

    audit_events_append(
        events=[
            event(1, "allowed", tool="ords.query.kb_select_ai_vpd", client_request_id="cli-abc-1"),
            event(2, "unauthenticated", detail="malformed_token"),
            event(3, "forbidden", detail="stakeholder_not_permitted", request_id="shared"),
            event(4, "allowed", tool="rag.search", request_id="shared"),
        ]
    )


@pytest.fixture
def auditor():
    ensure_default_groups()
    user = User.objects.create_user("tools-auditor", password="pw-for-tests", is_staff=True)
    user.groups.add(Group.objects.get(name="auditors"))
    client = Client()
    client.force_login(user)
    return client


def listed(client, query: str) -> set[str]:
    body = client.get(f"/admin/audit/auditevent/?{query}").content.decode()
    return set(re.findall(r"req-tools-\d|shared", body.split('id="result_list"')[1]))


@pytest.mark.parametrize(
    ("q", "found"),
    [
        ("malformed", {"req-tools-2"}),
        ("형식이 잘못된", {"req-tools-2"}),
        ("rag.search", {"shared"}),
        ("cli-abc", {"req-tools-1"}),
        ("req-tools-1", {"req-tools-1"}),
        ("stakeholder_not", {"shared"}),
    ],
)
def test_free_text_search_finds_by_action_reason_tool_and_client_request_id(
    events, auditor, q, found
):
    assert listed(auditor, f"q={q}") == found


def test_the_export_of_a_filtered_list_proves_each_event_and_is_audited(
    events, auditor, canary_delegation
):
    response = auditor.get("/admin/audit/auditevent/export/?outcome__exact=allowed")
    assert response.status_code == 200 and response.streaming
    assert "attachment" in response["Content-Disposition"]
    lines = [orjson.loads(line) for line in b"".join(response.streaming_content).splitlines()]
    header, proven = lines[0], [line["event"] for line in lines if line["type"] == PROOF_TYPE]
    assert header["type"] == BUNDLE_TYPE
    assert {r["outcome"] for r in proven} == {"allowed"} and len(proven) == 2
    for record in proven:
        assert event_hash(record) == record["hash"]
    exported = AuditEvent.objects.get(action="audit.exported")
    assert exported.changes["after"]["filter"] == "outcome__exact=allowed"
    whole = auditor.get("/admin/audit/auditevent/export/")
    text = b"".join(whole.streaming_content).decode()
    assert text.startswith('{"type":"hyperbook.audit_export"')
    assert "registry.delegation_registered" in text and CANARY not in text


def test_the_event_page_links_its_delegation_access_page_and_same_request(events, auditor):
    event = AuditEvent.objects.get(request_id="shared", outcome="forbidden")
    body = auditor.get(f"/admin/audit/auditevent/{event.pk}/change/").content.decode()
    assert 'href="/admin/registry/tokendelegation/7/change/"' in body
    assert 'href="/admin/registry/tokendelegation/access/KB-P-001/"' in body
    same = re.search(r'<a href="([^"]+)" id="event-same-request">([^<]+)</a>', body)
    assert "1" in same.group(2)
    assert listed(auditor, same.group(1).split("?", 1)[1]) == {"shared"}
