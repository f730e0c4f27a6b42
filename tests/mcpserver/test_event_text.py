"""Whatever text a client sends, its request's event can be hashed and stored on every database."""

import pytest

from audit.models import AuditEvent
from audit.services import audit_events_append
from audit.verification import verify_chain
from mcpserver.auditing import event_values
from mcpserver.records import RequestRecord

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        ("\x00", "\\x00"),  # PostgreSQL's text types refuse NUL
        ("도구\x00목록", "도구\\x00목록"),
        ("\ud800목록", "\\ud800목록"),  # a lone surrogate is not UTF-8; the Korean around it stays
        ("tools/list", "tools/list"),
    ],
)
def test_client_text_is_stored_as_sent_or_as_its_escape(sent, stored):
    record = RequestRecord(
        request_id="text-test", started=0.0, status=400, outcome=AuditEvent.Outcome.MALFORMED,
        rpc_method=sent, user_agent=sent, origin=sent,
    )  # fmt: skip
    (event,) = audit_events_append(events=[event_values(record)])
    saved = AuditEvent.objects.get(pk=event.pk)
    assert (saved.rpc_method, saved.user_agent, saved.origin) == (stored, stored, stored)
    assert verify_chain().ok


def test_a_client_s_long_user_agent_and_origin_are_kept_to_their_columns():
    record = RequestRecord(
        request_id="long-text", started=0.0, status=403, outcome=AuditEvent.Outcome.REFUSED_ORIGIN,
        user_agent="Agent/" + "a" * 5000, origin="https://" + "o" * 5000 + ".example",
    )  # fmt: skip
    (event,) = audit_events_append(events=[event_values(record)])
    saved = AuditEvent.objects.get(pk=event.pk)
    assert saved.user_agent == ("Agent/" + "a" * 5000)[:256]
    assert saved.origin == ("https://" + "o" * 5000)[:256]
    assert verify_chain().ok
