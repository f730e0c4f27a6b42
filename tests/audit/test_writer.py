"""The request-event writer: group commit, no waiting alone, bounded waiting, failing closed.

The writer thread commits to the real test database; the batches it writes are observed by wrapping
`audit_events_append` (the real one still runs)."""

import asyncio

import pytest

from audit import writer as writer_module
from audit.models import AuditEvent
from audit.writer import AuditWriter

pytestmark = pytest.mark.django_db(transaction=True)

# Bounds for the asyncio.wait_for calls below: far longer than any commit, far shorter than the
# group-commit waits that a wrong implementation would sit out.
SETTLE_SECONDS = 5.0
LONG_WAIT = 60.0


@pytest.fixture
def batches(monkeypatch) -> list[int]:
    seen: list[int] = []
    real = writer_module.audit_events_append

    def observed(*, events, **kwargs):
        events = list(events)
        seen.append(len(events))
        return real(events=events, **kwargs)

    monkeypatch.setattr(writer_module, "audit_events_append", observed)
    return seen


@pytest.fixture(autouse=True)
def writers(monkeypatch):
    """Every writer a test makes is closed afterwards (its thread holds a database connection)."""
    made: list[AuditWriter] = []
    real_init = AuditWriter.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(AuditWriter, "__init__", init)
    yield
    for writer in made:
        writer.close()
        assert writer._thread is None or not writer._thread.is_alive()


def event(n: int) -> dict:
    return {"action": "mcp.tools_list", "outcome": "allowed", "request_id": f"writer-test-{n}"}


async def requests_in_progress(writer: AuditWriter, count: int, gap: float, hung: int = 0) -> None:
    """`count` requests announced together, each finishing `gap` seconds after the previous,
    and `hung` more announced that never finish."""
    for _ in range(count + hung):
        writer.expect()

    async def request(n: int):
        await asyncio.sleep(n * gap)
        await writer.record(event(n), expected=True)

    await asyncio.wait_for(asyncio.gather(*(request(n) for n in range(count))), SETTLE_SECONDS)


def test_requests_in_progress_share_one_commit(batches):
    writer = AuditWriter(gap=LONG_WAIT, max_wait=LONG_WAIT)
    asyncio.run(requests_in_progress(writer, 5, gap=0.02))
    assert batches == [5]
    assert AuditEvent.objects.filter(request_id__startswith="writer-test-").count() == 5


def test_a_lone_request_is_committed_without_waiting(batches):
    writer = AuditWriter(gap=LONG_WAIT, max_wait=LONG_WAIT)
    asyncio.run(requests_in_progress(writer, 1, gap=0))
    assert batches == [1]


def test_a_batch_waits_on_while_siblings_keep_arriving(batches):
    # Each arrives within `gap` of the previous, so all share one commit, although the last comes
    # long after the first batch member's own `gap` has passed; the hung one is not waited for.
    writer = AuditWriter(gap=0.3, max_wait=LONG_WAIT)
    asyncio.run(requests_in_progress(writer, 4, gap=0.15, hung=1))
    assert batches == [4]


def test_a_batch_whose_siblings_trickle_in_is_cut_at_max_wait(batches):
    # Arrivals at 0, .1, .2 | .3, .4 s; the first batch is cut at .25 s, the second .15 s after .4
    writer = AuditWriter(gap=0.15, max_wait=0.25)
    asyncio.run(requests_in_progress(writer, 5, gap=0.1, hung=1))
    assert batches == [3, 2]


def test_the_wait_for_siblings_is_bounded(batches):
    writer = AuditWriter(gap=0.05, max_wait=LONG_WAIT)

    async def one_finishes_one_never_does():
        writer.expect()
        writer.expect()  # this request never records (say, it hangs in the engine)
        await asyncio.wait_for(writer.record(event(1), expected=True), SETTLE_SECONDS)

    asyncio.run(one_finishes_one_never_does())
    assert batches == [1]


def test_a_request_that_ends_without_an_event_releases_the_batch(batches):
    writer = AuditWriter(gap=LONG_WAIT, max_wait=LONG_WAIT)

    async def one_records_one_is_cancelled():
        writer.expect()
        writer.expect()
        recorded = asyncio.ensure_future(writer.record(event(1), expected=True))
        await asyncio.sleep(0.05)
        writer.forget()  # what the gate does for a request cancelled before it answered
        await asyncio.wait_for(recorded, SETTLE_SECONDS)

    asyncio.run(one_records_one_is_cancelled())
    assert batches == [1]


def test_a_failed_write_fails_only_its_own_request(batches):
    writer = AuditWriter(gap=LONG_WAIT, max_wait=LONG_WAIT)

    async def one_bad_event_among_good_ones():
        for _ in range(3):
            writer.expect()
        results = await asyncio.wait_for(
            asyncio.gather(
                writer.record(event(1), expected=True),
                writer.record(
                    {"action": "x", "outcome": "allowed", "no_such_field": 1}, expected=True
                ),
                writer.record(event(3), expected=True),
                return_exceptions=True,
            ),
            SETTLE_SECONDS,
        )
        return results

    results = asyncio.run(one_bad_event_among_good_ones())
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], ValueError)
    assert batches == [3, 1, 1, 1]  # the batch failed, then each event on its own
    stored = set(AuditEvent.objects.values_list("request_id", flat=True))
    assert {"writer-test-1", "writer-test-3"} <= stored


def test_closing_writes_what_is_pending_then_stops(batches):
    writer = AuditWriter(gap=LONG_WAIT, max_wait=LONG_WAIT)

    async def shut_down_while_a_batch_waits():
        writer.expect()
        writer.expect()  # never comes: the batch would wait LONG_WAIT for it
        recorded = asyncio.ensure_future(writer.record(event(1), expected=True))
        await asyncio.sleep(0.05)
        await asyncio.wait_for(asyncio.to_thread(writer.close), SETTLE_SECONDS)
        await asyncio.wait_for(recorded, SETTLE_SECONDS)

    asyncio.run(shut_down_while_a_batch_waits())
    assert batches == [1]
    assert not writer._thread.is_alive()


def test_appends_outside_a_transaction_and_inside_one_extend_one_chain():
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from audit.services import audit_events_append
    from audit.verification import verify_chain

    audit_events_append(events=[event(1)])  # creates the chain head
    with CaptureQueriesContext(connection) as queries:
        outside = audit_events_append(events=[event(2), event(3)])
    if connection.vendor == "sqlite":
        assert len(queries) == 0  # the driver's connection directly, no ORM statements
    with transaction.atomic():
        inside = audit_events_append(events=[event(4)])
    last = audit_events_append(events=[event(5)])
    assert [e.sequence for e in outside + inside + last] == [2, 3, 4, 5]
    report = verify_chain()
    assert report.ok and report.events_checked == 5, report.message
