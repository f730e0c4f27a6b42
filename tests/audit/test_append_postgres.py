"""PostgreSQL only: appends outside a transaction take one statement and keep the chain whole.

Real commits from several connections, so this module uses transactional_db (tables are flushed
afterwards)."""

import datetime
import threading

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from audit import services
from audit.models import AuditEvent, ChainHead
from audit.services import audit_events_append
from audit.verification import verify_chain

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

VARIED = {
    "action": "mcp.tools_call",
    "outcome": "tool_error",
    "http_status": 200,
    "request_id": "01a22c7b8fda700db7cab31e4fca29f3",
    "tool": "ords.query.kb_select_ai_vpd",
    "stakeholder_id": "KB-P-001",
    "stakeholder_role": "planner",
    "delegation_id": 2**40,
    "user_agent": '에이전트/1.0 "quoted" \\ back\\slash \u2028 😀',
    "latency_ms": 12.3456789,
    "row_count": 0,
    "masked_columns": ["customer_name", "주민번호"],
    "prompt_length": 17,
    "changes": {"before": {"enabled": True, "n": 1.5e-7}, "after": None},
    "detail": "engine_error",
}


@pytest.fixture
def fresh_heads(on_postgres):
    services._known_heads.clear()
    yield
    services._known_heads.clear()


def append(n: int, **values) -> list[AuditEvent]:
    return audit_events_append(
        events=[{"action": "mcp.tools_list", "outcome": "allowed", **values} for _ in range(n)]
    )


def test_after_the_first_append_one_statement_appends_a_batch(fresh_heads):
    append(1)  # the locking path: this process learns the head
    with CaptureQueriesContext(connection) as queries:
        appended = audit_events_append(events=[VARIED, {**VARIED, "http_status": None}] * 3)
    assert len(queries) == 1 and queries[0]["sql"].startswith("WITH moved AS")
    assert [e.sequence for e in appended] == [2, 3, 4, 5, 6, 7]
    assert ChainHead.objects.get(source="hyperbook").last_hash == appended[-1].hash
    report = verify_chain()
    assert report.ok, report.message


def test_stored_values_are_exactly_what_the_orm_path_stores(fresh_heads):
    append(1)
    fast = audit_events_append(events=[VARIED])[0]
    with transaction.atomic():  # inside a transaction: the locking path
        locked = audit_events_append(events=[VARIED])[0]
    fields = [f.attname for f in AuditEvent._meta.concrete_fields]
    skip = {"id", "sequence", "occurred_at", "prev_hash", "hash"}
    stored_fast = AuditEvent.objects.values(*fields).get(pk=fast.pk)
    stored_locked = AuditEvent.objects.values(*fields).get(pk=locked.pk)
    assert {k: v for k, v in stored_fast.items() if k not in skip} == {
        k: v for k, v in stored_locked.items() if k not in skip
    }
    assert stored_fast["occurred_at"] == fast.occurred_at
    assert stored_fast["id"] == fast.id
    assert stored_fast["latency_ms"] == VARIED["latency_ms"]
    assert verify_chain().ok


def test_a_head_moved_by_another_writer_sends_the_batch_down_the_locking_path(fresh_heads):
    append(2)
    stale = services._known_heads[(connection.alias, "hyperbook")]
    append(3)  # another writer (here: the same process) moves the head on
    services._known_heads[(connection.alias, "hyperbook")] = stale
    with CaptureQueriesContext(connection) as queries:
        appended = append(2)
    assert queries[0]["sql"].startswith("WITH moved AS")  # tried, inserted nothing
    assert len(queries) > 1  # then locked the head and appended
    assert [e.sequence for e in appended] == [6, 7]
    assert AuditEvent.objects.count() == 7
    assert verify_chain().ok


def test_a_value_too_long_for_its_column_is_refused_not_truncated(fresh_heads):
    append(1)
    with pytest.raises(Exception, match="too long"):
        append(1, user_agent="x" * 300)
    assert AuditEvent.objects.count() == 1
    assert verify_chain().ok


def test_concurrent_writers_interleave_without_gaps_or_forks(fresh_heads):
    errors = []

    def writer(tag: str):
        try:
            for batch in range(25):
                audit_events_append(
                    events=[
                        {
                            "action": "mcp.tools_list",
                            "outcome": "allowed",
                            "detail": f"{tag}{batch}",
                        }
                    ]
                    * 3,
                    return_events=False,
                )
        except Exception as exc:  # reported below; a thread's exception would be lost
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in "abc"]
    started = datetime.datetime.now()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), started
    sequences = list(AuditEvent.objects.order_by("sequence").values_list("sequence", flat=True))
    assert sequences == list(range(1, 3 * 25 * 3 + 1))
    report = verify_chain()
    assert report.ok, report.message
