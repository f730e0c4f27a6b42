import base64
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.api_tokens import api_token_issue
from audit.models import AuditEvent, ChainVerification
from audit.services import audit_events_append
from audit.tasks import verify_chain_job
from registry.models import McpServer

pytestmark = pytest.mark.django_db


@pytest.fixture
def some_events():
    return audit_events_append(
        events=[
            {
                "action": "mcp.tools_call",
                "outcome": "allowed",
                "http_status": 200,
                "request_id": "req-allowed-0001",
                "stakeholder_id": "KB-P-001",
                "tool": "ords.query.kb_select_ai_vpd",
                "row_count": 5,
            },
            {
                "action": "mcp.tools_list",
                "outcome": "unauthenticated",
                "http_status": 401,
                "request_id": "req-refused-0002",
            },
            {
                "action": "mcp.tools_call",
                "outcome": "forbidden",
                "http_status": 403,
                "request_id": "req-refused-0003",
                "stakeholder_id": "KB-P-099",
            },
        ]
    )


def test_an_auditor_finds_a_request_by_its_id_in_the_admin(client, auditor, some_events):
    client.force_login(auditor)
    response = client.get("/admin/audit/auditevent/", {"q": "req-refused-0002"})
    body = response.content.decode()
    assert response.status_code == 200
    assert "req-refused-0002" in body
    assert "req-allowed-0001" not in body
    detail = client.get(f"/admin/audit/auditevent/{some_events[1].pk}/change/")
    assert detail.status_code == 200
    assert "req-refused-0002" in detail.content.decode()


def test_the_admin_filters_by_outcome_status_and_stakeholder(client, auditor, some_events):
    client.force_login(auditor)
    body = client.get("/admin/audit/auditevent/", {"outcome": "forbidden"}).content.decode()
    assert "req-refused-0003" in body and "req-allowed-0001" not in body
    body = client.get("/admin/audit/auditevent/", {"http_status": "200"}).content.decode()
    assert "req-allowed-0001" in body and "req-refused-0003" not in body
    body = client.get("/admin/audit/auditevent/", {"range": "1h", "delivery_state": "pending"})
    assert body.status_code == 200 and "req-allowed-0001" in body.content.decode()


def test_auditors_cannot_add_change_or_delete_events(client, auditor, some_events):
    client.force_login(auditor)
    assert client.get("/admin/audit/auditevent/add/").status_code == 403
    assert client.post(f"/admin/audit/auditevent/{some_events[0].pk}/delete/").status_code == 403
    page = client.get(f"/admin/audit/auditevent/{some_events[0].pk}/change/").content.decode()
    assert 'name="_save"' not in page
    assert AuditEvent.objects.count() == 3


def test_the_changelist_never_counts_the_whole_table(client, auditor, some_events):
    client.force_login(auditor)
    with CaptureQueriesContext(connection) as queries:
        client.get("/admin/audit/auditevent/")
    counts = [
        q["sql"] for q in queries if "COUNT(" in q["sql"].upper() and "audit_auditevent" in q["sql"]
    ]
    assert counts, "the paginator still counts (capped)"
    assert all(re.search(r"LIMIT", sql, re.IGNORECASE) for sql in counts)


def test_the_chain_status_is_shown_and_can_be_checked(client, auditor, some_events):
    client.force_login(auditor)
    client.post("/admin/audit/auditevent/verify/")
    verify_chain_job(ChainVerification.objects.get().pk)  # what the worker runs
    body = client.get("/admin/audit/auditevent/").content.decode()
    assert "이벤트 3건을 확인했고 체인이 온전합니다." in body and "chain intact" not in body


def test_the_api_refuses_anonymous_and_non_auditors(client, some_events):
    assert client.get("/api/audit-events/").status_code in (401, 403)
    staff = User.objects.create_user("staff", password="pw-for-tests-only", is_staff=True)
    client.force_login(staff)
    assert client.get("/api/audit-events/").status_code == 403


def test_the_api_filters_by_field_names_with_cursor_pagination(client, auditor, some_events):
    client.force_login(auditor)
    response = client.get("/api/audit-events/", {"request_id": "req-allowed-0001"})
    results = response.json()["results"]
    assert [r["request_id"] for r in results] == ["req-allowed-0001"]
    assert results[0]["delivery_state"] == "pending"
    refused = client.get("/api/audit-events/", {"outcome": "forbidden"}).json()["results"]
    assert [r["request_id"] for r in refused] == ["req-refused-0003"]
    page = client.get("/api/audit-events/", {"page_size": 2}).json()
    assert len(page["results"]) == 2 and "cursor=" in page["next"]
    rest = client.get(page["next"]).json()["results"]
    assert len(rest) == 1


def test_the_api_accepts_an_issued_api_token(client, auditor, some_events):
    _, token = api_token_issue(
        user=auditor, label="siem", expires_at=timezone.now() + timedelta(days=1)
    )
    ok = client.get("/api/audit-events/", HTTP_AUTHORIZATION=f"Token {token}")
    assert ok.status_code == 200
    bad = client.get("/api/audit-events/", HTTP_AUTHORIZATION="Token hbapi_wrong-0000000000")
    assert bad.status_code == 401
    assert token not in str(list(auditor.api_tokens.values()))


def test_the_openapi_schema_is_served_to_auditors(client, auditor):
    client.force_login(auditor)
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    assert "/api/audit-events/" in response.content.decode()


def test_an_admin_change_becomes_an_event_with_actor_and_before_after(settings):
    call_command("import_mcp_servers", str(settings.MCP_SERVERS_FILE))
    created = AuditEvent.objects.filter(action="registry.server_created")
    assert set(created.values_list("target", flat=True)) == set(
        McpServer.objects.values_list("server_id", flat=True)
    )
    event = created.get(target="kb_mcp")
    assert event.actor == "system"
    assert event.changes["before"] is None
    assert event.changes["after"]["tool_allowlist"] == ["ords.query.kb_select_ai_vpd"]


def test_delivery_state_reads_the_same_before_and_after_the_worker_queues_events(
    client, auditor, some_events
):
    from audit.delivery import deliveries_queue_new
    from audit.models import Delivery

    client.force_login(auditor)

    def pending_ids():
        results = client.get("/api/audit-events/", {"delivery_state": "pending"}).json()
        return sorted(r["request_id"] for r in results["results"])

    everything = sorted(e.request_id for e in some_events)
    assert pending_ids() == everything  # appended, not queued yet: pending
    admin_page = client.get("/admin/audit/auditevent/", {"delivery_state": "pending"})
    assert all(rid in admin_page.content.decode() for rid in everything)

    assert deliveries_queue_new() == 3
    assert pending_ids() == everything  # queued: still pending
    Delivery.objects.filter(event_id=some_events[0].id).update(state=Delivery.State.DELIVERED)
    assert pending_ids() == sorted(rid for rid in everything if rid != some_events[0].request_id)
    delivered = client.get("/api/audit-events/", {"delivery_state": "delivered"}).json()
    assert [r["request_id"] for r in delivered["results"]] == [some_events[0].request_id]
    assert delivered["results"][0]["delivery_state"] == "delivered"


def test_the_action_and_outcome_filters_offer_every_action_the_code_records(client, auditor):
    """Each action the services and the gate emit is a declared AuditEvent.Action, and each can be
    picked in the filter; outcomes come from the field's choices (no scan of the table)."""
    import re
    from pathlib import Path

    from audit.admin import ActionFilter
    from audit.models import AuditEvent

    declared = {action.value for action in AuditEvent.Action}
    root = Path(__file__).resolve().parents[2]
    literals = set()
    for path in [*root.glob("*/*.py"), *root.glob("*/*/*.py")]:
        if "tests" in path.parts or ".venv" in path.parts or "bench" in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        literals |= set(re.findall(r'action="((?:registry|core|auth|console|mcp)\.[a-z_]+)"', text))
    assert literals <= declared, literals - declared
    offered = {value for value, _ in ActionFilter(None, {}, AuditEvent, None).lookups(None, None)}
    assert offered == declared
    with pytest.raises(ValueError):
        AuditEvent.Action("registry.server_renamed")  # an undeclared action cannot be recorded
    client.force_login(auditor)
    page = client.get("/admin/audit/auditevent/").content.decode()
    assert "?outcome__exact=summary" in page  # a choice of the outcome filter
    assert "?action=registry.tool_quarantined" in page and "?action=mcp.preflight" in page


def cursor(query: str) -> str:
    return base64.b64encode(query.encode()).decode()


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/audit-events/", {"cursor": cursor("p=abc")}),
        ("/api/audit-events/", {"cursor": cursor("p=%00")}),
        ("/api/audit-events/", {"cursor": cursor("p=99999999999999999999")}),
        ("/api/audit-events/", {"cursor": "not base64 at all"}),
        ("/api/audit-checkpoints/", {"cursor": cursor("p=abc")}),
        ("/api/audit-events/", {"source": "hyper\x00book"}),
        ("/api/audit-checkpoints/latest/", {"source": "hyper\x00book"}),
        ("/admin/audit/auditevent/", {"source": "\x00"}),
        ("/api/audit-events/", {"occurred_after": "0001-01-01T00:00:00+14:00"}),
        ("/api/audit-events/", {"occurred_before": "9999-12-31T23:59:59-14:00"}),
    ],
)
def test_a_crafted_query_is_the_clients_mistake_not_a_server_error(
    client, auditor, some_events, path, params
):
    client.raise_request_exception = False
    client.force_login(auditor)
    assert client.get(path, params).status_code == 400


def test_a_cursor_the_api_handed_out_still_pages(client, auditor, some_events):
    client.force_login(auditor)
    page = client.get("/api/audit-events/", {"page_size": 1}).json()
    assert client.get(page["next"]).status_code == 200
