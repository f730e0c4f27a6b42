"""The request-event writer: group commit, no waiting alone, answers only after the commit,
one bad event failing only its own request.

The writer commits to the real test database from the event loop's executor; its batches are
observed (and, to line up a batch, held) by wrapping `audit_events_append` (the real one still
runs)."""

import asyncio
import threading

import pytest
from django.db import connection, transaction

from audit import writer as writer_module
from audit.models import AuditEvent
from audit.services import audit_events_append
from audit.verification import verify_chain
from audit.writer import AuditWriter

pytestmark = pytest.mark.django_db(transaction=True)

# Far longer than any commit: a bound on the waits below, never reached by a working writer.
SETTLE_SECONDS = 5.0


class Batches:
    """What the writer appended (batch sizes); `hold()` makes the next append wait for
    `release()`, so that the events queued meanwhile form the batch after it."""

    def __init__(self):
        self.sizes: list[int] = []
        self.holding = threading.Event()  # the held append has started
        self._released = threading.Event()
        self._hold_next = False

    def hold(self):
        self._hold_next = True

    def release(self):
        self._released.set()

    def append(self, real, events, **kwargs):
        events = list(events)
        self.sizes.append(len(events))
        if self._hold_next:
            self._hold_next = False
            self.holding.set()
            self._released.wait(SETTLE_SECONDS)
        return real(events=events, **kwargs)


@pytest.fixture
def batches(monkeypatch) -> Batches:
    seen = Batches()
    real = writer_module.audit_events_append
    monkeypatch.setattr(
        writer_module, "audit_events_append", lambda *, events, **kw: seen.append(real, events)
    )
    return seen


@pytest.fixture
def writer():
    return AuditWriter()


def event(n: int) -> dict:
    return {"action": "mcp.tools_list", "outcome": "allowed", "request_id": f"writer-test-{n}"}


async def while_a_batch_is_held(batches: Batches, writer: AuditWriter, *records):
    """Start a first event's append and hold it; run `records` (queued behind it); release."""
    batches.hold()
    first = asyncio.ensure_future(writer.record(event(0)))
    await asyncio.to_thread(batches.holding.wait, SETTLE_SECONDS)
    later = [asyncio.ensure_future(r) for r in records]
    await asyncio.sleep(0.05)  # every record() has queued its event
    batches.release()
    await asyncio.wait_for(first, SETTLE_SECONDS)
    return await asyncio.wait_for(asyncio.gather(*later, return_exceptions=True), SETTLE_SECONDS)


def test_a_lone_request_is_committed_without_waiting(batches, writer):
    asyncio.run(asyncio.wait_for(writer.record(event(1)), SETTLE_SECONDS))
    assert batches.sizes == [1]
    assert AuditEvent.objects.filter(request_id="writer-test-1").exists()


def test_events_queued_while_a_batch_is_written_share_the_next_commit(batches, writer):
    asyncio.run(
        while_a_batch_is_held(batches, writer, *(writer.record(event(n)) for n in (1, 2, 3, 4)))
    )
    assert batches.sizes == [1, 4]
    assert AuditEvent.objects.filter(request_id__startswith="writer-test-").count() == 5
    assert verify_chain().ok


def test_a_request_is_answered_only_after_its_event_is_committed(batches, writer):
    async def scenario():
        batches.hold()
        recorded = asyncio.ensure_future(writer.record(event(1)))
        await asyncio.to_thread(batches.holding.wait, SETTLE_SECONDS)
        await asyncio.sleep(0.1)
        waiting = not recorded.done()
        batches.release()
        await asyncio.wait_for(recorded, SETTLE_SECONDS)
        # Read from this thread's own connection: the writer's transaction has committed.
        committed = await asyncio.to_thread(
            lambda: AuditEvent.objects.filter(request_id="writer-test-1").exists()
        )
        return waiting, committed

    waiting, committed = asyncio.run(scenario())
    assert waiting  # not answered while its append had not even run
    assert committed


def test_a_failed_write_fails_only_its_own_request(batches, writer):
    results = asyncio.run(
        while_a_batch_is_held(
            batches,
            writer,
            writer.record(event(1)),
            writer.record({"action": "x", "outcome": "allowed", "no_such_field": 1}),
            writer.record(event(3)),
        )
    )
    assert isinstance(results[1], ValueError)
    # The others are told where their event is: its id and sequence, as committed.
    for appended in (results[0], results[2]):
        stored = AuditEvent.objects.get(id=appended.event_id)
        assert stored.sequence == appended.sequence
    assert batches.sizes == [1, 3, 1, 1, 1]  # the batch failed, then each event on its own
    stored = set(AuditEvent.objects.values_list("request_id", flat=True))
    assert stored == {"writer-test-0", "writer-test-1", "writer-test-3"}
    assert verify_chain().ok


def test_closing_writes_what_is_queued_then_stops(batches, writer):
    async def shut_down_while_events_are_queued():
        batches.hold()
        first = asyncio.ensure_future(writer.record(event(0)))
        await asyncio.to_thread(batches.holding.wait, SETTLE_SECONDS)
        queued = asyncio.ensure_future(writer.record(event(1)))
        await asyncio.sleep(0.05)
        closing = asyncio.ensure_future(writer.close())
        await asyncio.sleep(0.05)
        assert not closing.done()  # an event is still queued
        batches.release()
        await asyncio.wait_for(closing, SETTLE_SECONDS)
        assert first.done() and queued.done()  # close() returned only once both were written

    asyncio.run(shut_down_while_events_are_queued())
    assert batches.sizes == [1, 1]
    assert AuditEvent.objects.filter(request_id__startswith="writer-test-").count() == 2


def test_appends_outside_a_transaction_and_inside_one_extend_one_chain():
    outside = audit_events_append(events=[event(1), event(2)])
    with transaction.atomic():
        inside = audit_events_append(events=[event(3)])
        assert connection.in_atomic_block
    last = audit_events_append(events=[event(4)])
    assert [e.sequence for e in outside + inside + last] == [1, 2, 3, 4]
    report = verify_chain()
    assert report.ok and report.events_checked == 4, report.message
