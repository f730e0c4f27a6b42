import datetime
import json
import uuid

import pytest
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction
from hypothesis import given, settings
from hypothesis import strategies as st

import audit.chain
import audit.verification
from audit.chain import HASHED_FIELDS, canonical_json, event_hash, occurred_at_text
from audit.models import AuditEvent, ChainHead, Delivery
from audit.services import audit_events_append, audit_record
from audit.verification import verify_chain

pytestmark = pytest.mark.django_db


def append(n: int) -> list[AuditEvent]:
    return audit_events_append(
        events=[
            {"action": "mcp.tools_call", "outcome": "allowed", "http_status": 200, "row_count": i}
            for i in range(n)
        ]
    )


def tamper(sql: str, params: list) -> None:
    """What someone with direct database access could do, bypassing the append-only trigger."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no deferred checks may be pending
            cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER audit_event_append_only")
            cursor.execute(sql, params)
            cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER audit_event_append_only")
        else:
            cursor.execute("DROP TRIGGER audit_event_no_update")
            cursor.execute(sql, params)
            cursor.execute(
                "CREATE TRIGGER audit_event_no_update BEFORE UPDATE ON audit_auditevent "
                "BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END"
            )


def test_events_get_gap_free_sequences_and_link_to_each_other():
    first = append(3)
    second = append(2)
    events = list(AuditEvent.objects.order_by("sequence"))
    assert [e.sequence for e in events] == [1, 2, 3, 4, 5]
    assert events[0].prev_hash == "0" * 64
    for previous, current in zip(events, events[1:], strict=False):
        assert current.prev_hash == previous.hash
    assert ChainHead.objects.get().last_hash == second[-1].hash != first[-1].hash
    assert not Delivery.objects.exists()  # the event is the outbox entry; the worker queues it
    assert verify_chain().ok


def test_the_application_cannot_change_or_delete_an_event():
    event = append(1)[0]
    event.outcome = "forbidden"
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        event.delete()
    with pytest.raises(TypeError):
        AuditEvent.objects.filter(pk=event.pk).update(outcome="forbidden")
    with pytest.raises(TypeError):
        AuditEvent.objects.all().delete()


def test_the_database_refuses_an_update_even_in_raw_sql():
    event = append(1)[0]
    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditevent SET outcome = %s WHERE id = %s",
            ["forbidden", event_id_param(event)],
        )


def event_id_param(event):
    return event.id.hex if connection.vendor == "sqlite" else event.id


def test_a_tampered_event_is_detected_by_the_chain_check():
    events = append(5)
    tamper(
        "UPDATE audit_auditevent SET row_count = %s WHERE id = %s", [999, event_id_param(events[2])]
    )
    report = verify_chain()
    assert not report.ok
    assert report.first_bad_sequence == 3
    assert "altered" in report.message
    with pytest.raises(CommandError, match="#3"):
        call_command("verify_audit_chain")


def test_a_missing_event_is_detected_by_the_chain_check():
    events = append(4)
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM audit_delivery WHERE event_id = %s", [event_id_param(events[1])]
        )
    tamper("DELETE FROM audit_auditevent WHERE id = %s", [event_id_param(events[1])])
    report = verify_chain()
    assert not report.ok
    assert report.first_bad_sequence == 2
    assert "missing" in report.message


def test_a_rewritten_chain_tail_is_detected_against_the_head():
    events = append(3)
    with connection.cursor() as cursor:
        cursor.execute(
            "DELETE FROM audit_delivery WHERE event_id = %s", [event_id_param(events[2])]
        )
    tamper("DELETE FROM audit_auditevent WHERE id = %s", [event_id_param(events[2])])
    report = verify_chain()
    assert not report.ok
    assert "missing event #3" in report.message


def test_events_appended_while_the_check_reads_are_left_to_the_next_check(monkeypatch):
    """The chain grows while a worker checks it. What the check finds is the chain up to the
    head it read first, not a gap between its last read and a head that moved on."""
    append(3)
    reading = audit.verification.events_in_sequence

    def read_then_another_request_lands(**kwargs):
        yield from reading(**kwargs)
        append(2)  # committed after the check's last read, before it looks at the head again

    monkeypatch.setattr(audit.verification, "events_in_sequence", read_then_another_request_lands)
    report = verify_chain()
    assert report.ok, report.message
    assert (report.events_checked, report.verified_through) == (3, 3)
    monkeypatch.undo()
    assert verify_chain(verified_through=3).verified_through == 5


def test_the_chain_check_passes_on_an_intact_log(capsys):
    append(3)
    audit_record(action="registry.server_updated", outcome="changed", actor="root", target="kb_mcp")
    call_command("verify_audit_chain")
    assert "4 events, chain intact" in capsys.readouterr().out


# What a request event holds: text (any character but a lone surrogate), integers, null, lists.
_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
_REQUEST_VALUES = st.one_of(
    st.none(), _TEXT, st.integers(-(2**63), 2**63 - 1), st.lists(_TEXT, max_size=5)
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(HASHED_FIELDS), _REQUEST_VALUES))
def test_request_events_hash_the_same_canonical_json_as_the_json_module(values):
    values = {
        **values,
        "id": uuid.uuid4(),
        "occurred_at": datetime.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.UTC),
        "latency_ms": 1.5,
        "changes": {},
    }
    data = json.loads(canonical_json(values))
    assert canonical_json(values) == json.dumps(
        data, ensure_ascii=False, sort_keys=True, separators=(",", ":")
    )


def _row() -> dict:
    """An event as the database hands it over: a UUID and an aware datetime."""
    return {
        **dict.fromkeys(HASHED_FIELDS, ""),
        "id": uuid.UUID("0190f2a4-1111-7000-8000-000000000001"),
        "sequence": 7,
        "occurred_at": datetime.datetime(2026, 6, 30, 21, 34, 56, 789012, tzinfo=KST),
        "latency_ms": 12.3456,
        "row_count": None,
        "masked_columns": ["주민등록번호"],
        "changes": {"이름": {"전": "홍길동", "후": "김철수"}, "열": [1, 2.5, None]},
        "client_request_id": "req-1",
        "prev_hash": "a" * 64,
    }


KST = datetime.timezone(datetime.timedelta(hours=9))


@pytest.mark.parametrize("changes", [{}, {"이름": {"후": "김철수"}}], ids=["request", "admin"])
def test_an_exported_event_hashes_as_its_row(changes):
    row = {**_row(), "changes": changes}
    exported = json.loads(json.dumps({**row, "id": str(row["id"])}, default=occurred_at_text))
    assert exported["occurred_at"] == "2026-06-30T12:34:56.789012Z"
    assert event_hash(exported) == event_hash(row)


@pytest.mark.parametrize("changes", [{}, {"이름": {"후": "김철수"}}], ids=["request", "admin"])
def test_the_chain_hashes_the_same_without_orjson(monkeypatch, changes):
    row = {**_row(), "changes": changes}
    with_orjson = event_hash(row)
    monkeypatch.setattr(audit.chain, "orjson", None)
    assert event_hash(row) == with_orjson
