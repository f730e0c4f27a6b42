"""A question the tool refused reads as refused wherever an auditor looks: its own outcome, counted
on the dashboard, found by the list's refused filter, in the overview's reasons and as a failure
in the OCSF export. The protocol's probes (GET for a stream, DELETE for a session) read as what
they are and count as nothing refused. With no delivery target, delivery reads as off."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.test.utils import override_settings
from django.utils import timezone

from audit.export import event_record, ocsf_event
from audit.models import AuditEvent
from audit.overview import audit_overview
from audit.services import audit_events_append
from core.groups import AUDITORS, ensure_default_groups
from registry.dashboard import dashboard_figures

pytestmark = [pytest.mark.db, pytest.mark.django_db]

Outcome = AuditEvent.Outcome
Action = AuditEvent.Action


@pytest.fixture
def today():
    now = timezone.now() - timedelta(minutes=1)

    def event(action, outcome, reason, request_id, status=200):
        return {
            "action": action,
            "outcome": outcome,
            "detail": reason,
            "request_id": request_id,
            "http_status": status,
            "occurred_at": now,
            "tool": "ords.query.kb_select_ai_vpd" if action == Action.MCP_TOOLS_CALL else "",
        }

    return audit_events_append(
        events=[
            event(Action.MCP_TOOLS_CALL, Outcome.ALLOWED, "", "answered"),
            event(Action.MCP_TOOLS_CALL, Outcome.REFUSED, "out_of_data", "claims-question"),
            event(Action.MCP_TOOLS_CALL, Outcome.REFUSED, "unread_words", "odd-words"),
            event(Action.MCP_STREAM_OPEN, Outcome.NOT_OFFERED, "", "sse-probe", 405),
            event(Action.MCP_SESSION_END, Outcome.NOT_OFFERED, "", "session-delete", 405),
        ]
    )


def exported(event: AuditEvent) -> dict:
    return event_record(AuditEvent.objects.values().get(pk=event.pk))


@pytest.fixture
def auditor(client):
    ensure_default_groups()
    user = User.objects.create_user("auditor", password="x", is_staff=True)
    user.groups.add(Group.objects.get(name=AUDITORS))
    client.force_login(user)
    return user


def test_the_dashboard_counts_refused_questions(today, auditor):
    figures = {figure.key: figure for figure in dashboard_figures(user=auditor)}
    assert figures["calls"].value == "3"
    assert figures["refusals"].value == "2"


def test_the_lists_refused_filter_finds_refusals_and_not_probes(today, auditor, client):
    page = client.get("/admin/audit/auditevent/", {"refused": "1"}).content.decode()
    assert "claims-question" in page and "odd-words" in page
    assert "sse-probe" not in page and "answered" not in page
    label = str(Outcome.REFUSED.label)
    assert label in page, "the outcome column names the refusal"


def test_the_overview_lists_the_tools_reasons(today):
    reasons = {row.reason: row.count for row in audit_overview().refusals}
    assert reasons == {"out_of_data": 1, "unread_words": 1}


def test_ocsf_reads_a_refusal_as_a_failure_and_a_probe_as_neither(today):
    refused, probe = today[1], today[3]
    as_refused = ocsf_event(exported(refused))
    assert (as_refused["status_id"], as_refused["status"]) == (2, "Failure")
    assert as_refused["status_detail"] == "out_of_data"
    as_probe = ocsf_event(exported(probe))
    assert (as_probe["status_id"], as_probe["status"], as_probe["severity_id"]) == (99, "Other", 1)
    answered = ocsf_event(exported(today[0]))
    assert answered["status"] == "Success"


@pytest.mark.parametrize(("url", "reads"), [("", "꺼짐"), ("http://127.0.0.1:9/m", "대기")])
def test_delivery_reads_off_without_a_target(today, auditor, client, url, reads):
    with override_settings(EGS2_MEMORY_API_URL=url, LANGUAGE_CODE="ko"):
        page = client.get(f"/admin/audit/auditevent/{today[1].pk}/change/").content.decode()
    assert reads in page
