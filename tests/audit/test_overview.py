"""The auditors' overview: events per hour by outcome (a chart), refusals by reason (summaries
included), the delivery lag and the chain status; every figure links to the filtered event list,
and each link lists exactly the events the figure counts."""

import html
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from audit.models import AuditEvent
from audit.overview import audit_overview
from audit.services import audit_events_append

pytestmark = [pytest.mark.db, pytest.mark.django_db]

Outcome = AuditEvent.Outcome


@pytest.fixture
def history():
    """Events over three hours (and one outside the day), as the gate would record them."""
    now = timezone.now().replace(minute=30, second=0, microsecond=0)

    def at(hours_ago, outcome, reason="", n=1, **extra):
        return [
            {
                "action": AuditEvent.Action.MCP_TOOLS_CALL,
                "outcome": outcome,
                "detail": reason,
                "request_id": f"req-{hours_ago}-{outcome}-{reason}-{i}",
                "occurred_at": now - timedelta(hours=hours_ago),
                **extra,
            }
            for i in range(n)
        ]

    audit_events_append(
        events=[
            *at(30, Outcome.ALLOWED, n=4),  # yesterday: not in the last 24 hours
            *at(2, Outcome.ALLOWED, n=3),
            *at(2, Outcome.UNAUTHENTICATED, "missing_token"),
            *at(1, Outcome.FORBIDDEN, "tool_not_delegated", n=2),
            *at(0, Outcome.ALLOWED),
            *at(
                0,
                Outcome.SUMMARY,
                changes={"counts": {"401 missing_token": 40, "429 auth_rate_limited": 5}},
            ),
        ]
    )
    return now


def test_events_are_counted_per_hour_and_outcome_within_the_day(history):
    overview = audit_overview(now=history)
    assert len(overview.hours) == 24
    assert overview.by_outcome[Outcome.ALLOWED][-3:] == (3, 0, 1)
    assert overview.by_outcome[Outcome.UNAUTHENTICATED][-3:] == (1, 0, 0)
    assert overview.by_outcome[Outcome.FORBIDDEN][-3:] == (0, 2, 0)
    assert overview.total == 3 + 1 + 2 + 1 + 1  # the 4 of yesterday are not in it
    refusals = {entry.reason: (entry.count, entry.recorded) for entry in overview.refusals}
    assert refusals == {
        "missing_token": (41, 1),  # one recorded alone, forty counted in a summary
        "auth_rate_limited": (5, 0),
        "tool_not_delegated": (2, 2),
    }
    assert overview.backlog == 12 and overview.delivery_lag >= timedelta(hours=30)


def test_the_page_draws_the_counts_and_every_figure_links_to_its_events(history, client, auditor):
    client.force_login(auditor)
    body = client.get("/admin/audit/auditevent/overview/").content.decode()
    bars = re.findall(
        r'<a href="([^"]+)"><rect class="bar outcome-(\w+)"[^>]* data-value="(\d+)"', body
    )
    drawn = {}
    for _href, outcome, value in bars:
        drawn.setdefault(outcome, []).append(int(value))
    assert drawn["allowed"][-3:] == [3, 0, 1]
    assert drawn["forbidden"][-3:] == [0, 2, 0]
    assert sum(map(sum, drawn.values())) == 8

    # The bar of two forbidden calls an hour ago lists exactly those two events.
    href = next(html.unescape(h) for h, o, v in bars if o == "forbidden" and v == "2")
    listed = client.get(href).content.decode()
    assert listed.count("req-1-forbidden-tool_not_delegated-") == 2
    assert "req-2-" not in listed and "req-0-" not in listed

    # A reason links to its refusals; the backlog to the undelivered events.
    reason = re.search(r'<tr data-reason="tool_not_delegated"><td><a href="([^"]+)"', body)
    refused = client.get(html.unescape(reason.group(1))).content.decode()
    assert refused.count("req-1-forbidden-tool_not_delegated-") == 2
    assert "req-2-unauthenticated" not in refused
    assert re.search(r'<tr data-reason="missing_token">.*?<td class="count">41</td>', body, re.S)
    assert 'id="overview-backlog" data-value="12"' in body
    chain = re.search(r'id="overview-chain">(.*?)</div>', body, re.S).group(1)
    assert "해시 체인이 아직 검증되지 않았습니다" in chain
    assert "아직 서명된 체크포인트가 없습니다" in chain


def test_the_event_list_links_to_the_overview(client, auditor):
    client.force_login(auditor)
    assert (
        "/admin/audit/auditevent/overview/"
        in client.get("/admin/audit/auditevent/").content.decode()
    )


def test_only_those_who_may_read_the_audit_log_see_the_overview(client, history):
    client.force_login(User.objects.create_user("staff", password="pw-1", is_staff=True))
    assert client.get("/admin/audit/auditevent/overview/").status_code == 403


def test_an_hour_that_is_not_one_filters_nothing_and_breaks_nothing(history, client, auditor):
    client.force_login(auditor)
    response = client.get("/admin/audit/auditevent/", {"hour": "not-an-hour"})
    assert response.status_code == 200


def test_past_the_summary_cap_only_the_newest_summaries_are_read_and_the_page_says_so(
    client, auditor, settings, monkeypatch
):
    import audit.overview

    monkeypatch.setattr(audit.overview, "SUMMARIES_READ_MAX", 2)
    now = timezone.now()
    audit_events_append(
        events=[
            {
                "action": AuditEvent.Action.MCP_REFUSALS_SUMMARY,
                "outcome": Outcome.SUMMARY,
                "occurred_at": now - timedelta(minutes=minutes),
                "changes": {"counts": {"401 missing_token": 10}},
            }
            for minutes in (1, 2, 3)
        ]
    )
    overview = audit_overview(now=now)
    assert overview.summaries_capped
    assert {e.reason: e.count for e in overview.refusals} == {"missing_token": 20}
    client.force_login(auditor)
    body = client.get("/admin/audit/auditevent/overview/").content.decode()
    assert 'id="overview-summaries-capped"' in body
