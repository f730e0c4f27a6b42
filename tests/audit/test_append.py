"""The one append path: the same transaction on SQLite and PostgreSQL, whoever appends at once.

Real commits from several threads and processes, so this module uses transactional_db (tables are
flushed afterwards)."""

import os
import subprocess
import sys
import threading

import pytest
from django.db import connection, connections, transaction

from audit.models import AuditEvent, ChainHead
from audit.services import audit_events_append, audit_record
from audit.verification import verify_chain
from tests.live import ROOT, database_url_for_servers

pytestmark = pytest.mark.django_db(transaction=True)

VARIED = {
    "action": "mcp.tools_call",
    "outcome": "tool_error",
    "http_status": 200,
    "request_id": "01a22c7b8fda700db7cab31e4fca29f3",
    "client_request_id": "client-7",
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

# Each child process appends this many batches of BATCH events, as fast as it can.
BATCHES, BATCH = 20, 3
CHILD = """
import sys
import django
django.setup()
from audit.services import audit_events_append
tag, batches, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for n in range(batches):
    event = {"action": "mcp.tools_list", "outcome": "allowed", "detail": f"{tag}{n}"}
    audit_events_append(events=[event] * batch)
"""


def events(n: int, **values) -> list[dict]:
    return [{"action": "mcp.tools_list", "outcome": "allowed", **values} for _ in range(n)]


def assert_one_whole_chain(expected: int) -> None:
    sequences = list(AuditEvent.objects.order_by("sequence").values_list("sequence", flat=True))
    assert sequences == list(range(1, expected + 1))
    assert ChainHead.objects.get(source="hyperbook").last_sequence == expected
    report = verify_chain()
    assert report.ok, report.message


def test_appends_from_several_threads_never_fork_the_chain_or_skip_a_sequence():
    errors = []

    def writer(tag: str):
        try:
            for n in range(BATCHES):
                audit_events_append(events=events(BATCH, detail=f"{tag}{n}"))
        except Exception as exc:  # reported below; a thread's exception would be lost
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    assert_one_whole_chain(4 * BATCHES * BATCH)


@pytest.mark.slow
def test_appends_from_several_processes_never_fork_the_chain_or_skip_a_sequence(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "hyperbook.settings.test",
        "DATABASE_URL": database_url_for_servers(),
    }
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, tag, str(BATCHES), str(BATCH)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / f"{tag}.log", "wb"),  # noqa: SIM115 - closed with the process
        )
        for tag in "abc"
    ]
    for child in children:
        child.wait(timeout=120)
    logs = {p.name: p.read_text()[-2000:] for p in tmp_path.iterdir()}
    assert [child.returncode for child in children] == [0, 0, 0], logs
    assert_one_whole_chain(3 * BATCHES * BATCH)


def test_the_first_append_creates_the_chain_head():
    assert not ChainHead.objects.exists()
    appended = audit_events_append(events=events(2))
    assert [e.sequence for e in appended] == [1, 2]
    assert appended[0].prev_hash == "0" * 64 and appended[1].prev_hash == appended[0].hash
    assert_one_whole_chain(2)


def test_an_append_inside_a_callers_transaction_is_rolled_back_with_it():
    audit_events_append(events=events(1))

    class Undone(Exception):
        pass

    with pytest.raises(Undone), transaction.atomic():
        audit_record(action="registry.server_changed", outcome="changed")
        raise Undone
    audit_events_append(events=events(1))  # takes the sequence the rolled-back event had
    assert_one_whole_chain(2)


def test_an_unknown_field_is_refused_before_anything_is_written():
    with pytest.raises(ValueError, match="no_such_field"):
        audit_events_append(events=[*events(1), {"action": "x", "no_such_field": 1}])
    assert not AuditEvent.objects.exists()


def test_what_is_stored_is_what_was_hashed():
    appended = audit_events_append(events=[VARIED, {**VARIED, "http_status": None}])
    fields = [f.attname for f in AuditEvent._meta.concrete_fields]
    stored = AuditEvent.objects.values(*fields).get(pk=appended[0].pk)
    # The hash covers a latency's three decimals, so three are what is kept: no digit that a
    # change could hide in.
    hashed = {**VARIED, "latency_ms": round(VARIED["latency_ms"], 3)}
    assert hashed["latency_ms"] != VARIED["latency_ms"], "the example has digits past the third"
    assert {k: stored[k] for k in VARIED} == hashed
    assert stored["occurred_at"] == appended[0].occurred_at
    assert verify_chain().ok  # recomputes every hash from the stored rows


def test_text_too_long_for_its_column_is_stored_fitted_and_hashed_as_stored():
    # PostgreSQL would refuse the long values; SQLite would keep them whole. Either way the event
    # holds them cut to their columns, and its hash is over what is stored.
    long = {
        "user_agent": "u" * 5000,
        "origin": "o" * 5000,
        "tool": "t" * 5000,
        "detail": "d" * 5000,
    }
    (appended,) = audit_events_append(events=events(1, **long))
    stored = AuditEvent.objects.get(pk=appended.pk)
    for name, value in long.items():
        max_length = AuditEvent._meta.get_field(name).max_length
        assert getattr(stored, name) == getattr(appended, name) == value[:max_length]
    assert_one_whole_chain(1)


def test_the_delivery_nudge_is_sent_only_after_the_commit(monkeypatch):
    from audit import services

    nudged = []
    monkeypatch.setattr(
        services, "_queue_delivery", lambda last: nudged.append((last, connection.in_atomic_block))
    )
    with transaction.atomic():
        audit_events_append(events=events(1))
        assert nudged == []
    assert nudged == [(1, False)]
