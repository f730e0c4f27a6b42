"""The audit list of one console exchange: `?exchange=<id>` and the event page's link to it."""

import re

import pytest

from audit.models import AuditEvent
from audit.selectors import exchange_events, is_exchange_id
from audit.services import audit_events_append

pytestmark = pytest.mark.django_db

EXCHANGE_ID = "5f0c1e2d3b4a59687766554433221100"
OTHER_ID = "aaaabbbbccccddddeeeeffff00001111"


@pytest.mark.parametrize(
    "value", [EXCHANGE_ID, "req-1", "a.b_c:d~e-f", "x" * 64, "0123456789abcdef"]
)
def test_a_request_ids_charset_is_an_exchange_id(value):
    assert is_exchange_id(value)


@pytest.mark.parametrize(
    "value",
    ["", "x" * 65, "has space", "<script>", "a'b", 'a"b', "a/b", "a%20b", "한글", "a\nb", "a\x00b"],
)
def test_anything_else_is_not(value):
    assert not is_exchange_id(value)


@pytest.fixture
def two_exchanges():
    def event(action, rpc_method, exchange_id):
        return {
            "action": action,
            "outcome": "allowed",
            "rpc_method": rpc_method,
            "client_request_id": exchange_id,
        }

    return audit_events_append(
        events=[
            event("mcp.initialize", "initialize", EXCHANGE_ID),
            event("mcp.tools_list", "tools/list", EXCHANGE_ID),
            event("mcp.initialize", "initialize", OTHER_ID),
            event("console.call", "tools/call", EXCHANGE_ID),
            event("mcp.tools_call", "tools/call", None),
        ]
    )


def test_an_exchanges_events_are_exactly_those_that_carry_its_id(two_exchanges):
    mine = {e.pk for e in two_exchanges if e.client_request_id == EXCHANGE_ID}
    found = exchange_events(AuditEvent.objects.all(), exchange_id=EXCHANGE_ID)
    assert {e.pk for e in found} == mine
    assert len(mine) == 3


def test_text_that_is_no_exchange_id_matches_nothing_rather_than_everything(two_exchanges):
    assert not exchange_events(AuditEvent.objects.all(), exchange_id="' OR 1=1 --").exists()


def listed(response) -> set[str]:
    return set(re.findall(r"/admin/audit/auditevent/([0-9a-f-]{36})/change/", response))


def test_the_audit_list_filters_by_exchange(client, auditor, two_exchanges):
    client.force_login(auditor)
    response = client.get("/admin/audit/auditevent/", {"exchange": EXCHANGE_ID})
    assert response.status_code == 200
    body = response.content.decode()
    assert listed(body) == {str(e.pk) for e in two_exchanges if e.client_request_id == EXCHANGE_ID}
    assert EXCHANGE_ID in body  # the chosen id is shown, and can be cleared


def test_a_malformed_exchange_in_the_url_lists_no_event_and_is_not_echoed(
    client, auditor, two_exchanges
):
    client.force_login(auditor)
    response = client.get("/admin/audit/auditevent/", {"exchange": "<b>x</b>"})
    assert response.status_code == 200
    body = response.content.decode()
    assert listed(body) == set()
    assert "<b>x</b>" not in body


def test_an_events_page_links_to_the_rest_of_its_exchange(client, auditor, two_exchanges):
    client.force_login(auditor)
    linked = client.get(f"/admin/audit/auditevent/{two_exchanges[0].pk}/change/")
    assert f'href="/admin/audit/auditevent/?exchange={EXCHANGE_ID}"' in linked.content.decode()
    alone = client.get(f"/admin/audit/auditevent/{two_exchanges[4].pk}/change/")
    assert 'id="event-exchange"' not in alone.content.decode()
