"""Delivery rules against a real HTTP stand-in for the Memory API on loopback."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.delivery import deliver_pending, deliveries_claim, deliveries_queue_new
from audit.models import AuditEvent, Delivery, DeliveryAlarm, DeliveryCursor, SinkStatus
from audit.services import audit_events_append
from tests.audit.memory_sink import MemorySink

pytestmark = pytest.mark.django_db

SERVICE_TOKEN = "svc-credential-for-tests-0123456789"


@pytest.fixture
def sink(settings):
    with MemorySink(SERVICE_TOKEN, slow_seconds=1.5) as sink:
        settings.EGS2_MEMORY_API_URL = sink.url
        settings.EGS2_MEMORY_API_TOKEN = SERVICE_TOKEN
        settings.EGS2_MEMORY_API_TIMEOUT_SECONDS = 1
        settings.EGS2_MEMORY_API_BATCH_SIZE = 10
        settings.AUDIT_DELIVERY_MAX_BACKOFF_SECONDS = 1
        yield sink


def events(n: int) -> list[AuditEvent]:
    return audit_events_append(
        events=[{"action": "mcp.tools_list", "outcome": "allowed"} for _ in range(n)]
    )


def states() -> dict[str, str]:
    return {str(d.event_id): d.state for d in Delivery.objects.all()}


def test_new_events_are_queued_once_each_in_sequence_order():
    first = events(5)
    assert deliveries_queue_new(limit=3) == 3
    assert deliveries_queue_new() == 2
    assert deliveries_queue_new() == 0
    second = events(2)
    assert deliveries_queue_new() == 2
    queued = list(
        Delivery.objects.order_by("sequence").values_list("event_id", "sequence", "state")
    )
    assert queued == [(e.id, e.sequence, "pending") for e in first + second]
    assert DeliveryCursor.objects.get(source="hyperbook").queued_sequence == second[-1].sequence


def test_event_ids_are_time_ordered_uuids():
    created = events(50)
    assert all(e.id.version == 7 for e in created)
    assert [e.id for e in created] == sorted(e.id for e in created)


def test_created_events_are_marked_delivered_in_batches(sink):
    created = events(25)
    report = deliver_pending()
    assert report.delivered == 25
    assert set(sink.memories) == {str(e.id) for e in created}
    assert set(states().values()) == {"delivered"}
    assert sink.requests == 3
    body = json.loads(sink.raw_bodies[0])
    memory = body["memories"][0]
    assert memory["namespace"] == "hyperbook.audit"
    assert memory["kind"] == "audit_event"
    assert memory["sequence"] == 1
    assert memory["hash"] == created[0].hash
    assert set(sink.auth_headers) == {f"Bearer {SERVICE_TOKEN}"}


def test_duplicates_count_as_delivered(sink):
    created = events(3)
    sink.memories[str(created[0].id)] = {}
    assert deliver_pending().delivered == 3
    assert set(states().values()) == {"delivered"}


def test_a_rejected_item_is_kept_and_flagged_and_the_rest_delivered(sink):
    created = events(4)
    sink.faults = ["reject_first"]
    report = deliver_pending()
    assert report.rejected == 1 and report.delivered == 3
    delivery = Delivery.objects.get(event_id=created[0].id)
    assert delivery.state == "rejected"
    assert "content: bad" in delivery.last_error
    assert AuditEvent.objects.filter(pk=created[0].pk).exists()


@pytest.mark.parametrize("fault", ["echo_400", "echo_reject"])
def test_a_refusal_that_echoes_our_bearer_is_kept_without_it(sink, fault):
    created = events(2)
    sink.faults = [fault]
    deliver_pending()
    rejected = Delivery.objects.get(event_id=created[0].id)
    assert rejected.state == "rejected" and "refused Authorization" in rejected.last_error
    kept = " ".join(Delivery.objects.values_list("last_error", flat=True))
    assert "[redacted]" in kept
    assert SERVICE_TOKEN[:12] not in kept  # not even the piece a cut at the length limit leaves


@pytest.mark.parametrize("fault", ["500", "down", "garbage", "slow"])
def test_a_transient_failure_is_retried_after_the_sinks_short_backoff(sink, fault):
    events(3)
    sink.faults = [fault]
    report = deliver_pending()
    assert report.retried == 3 and report.delivered == 3  # waited out, then delivered
    assert set(states().values()) == {"delivered"}
    assert Delivery.objects.first().attempts == 1
    status = SinkStatus.objects.get(name="egs2")
    assert (status.failures, status.retry_at) == (0, None)
    assert status.last_error and status.last_success_at


def test_a_sink_backing_off_longer_than_the_run_keeps_events_pending(sink):
    events(3)
    sink.faults = ["500"]
    report = deliver_pending(time_budget_seconds=0.3)  # the backoff (0.5 to 1 s) is longer
    assert report.delivered == 0 and report.skipped == "the Memory API is backing off"
    assert set(states().values()) == {"pending"}
    assert deliver_pending(time_budget_seconds=0.3).delivered == 0  # still resting
    assert sink.requests == 1
    SinkStatus.objects.update(retry_at=timezone.now())  # the rest is over
    assert deliver_pending().delivered == 3


def test_the_backlog_drains_at_full_speed_once_the_sink_answers(sink, settings):
    settings.AUDIT_DELIVERY_MAX_BACKOFF_SECONDS = 600
    events(3)
    sink.faults = ["500"]
    deliver_pending(time_budget_seconds=0.5)
    events(40)  # more arrive while the sink rests
    # Each event failed at most once; the sink's health, not their attempts, decides when.
    SinkStatus.objects.update(retry_at=timezone.now())
    assert deliver_pending().delivered == 43
    assert sink.requests == 1 + 5  # one failure, then 43 events in batches of 10


def test_the_backoff_grows_with_failures_and_jitter_stays_under_the_maximum(settings):
    from audit.delivery import sink_backoff_seconds

    settings.AUDIT_DELIVERY_MAX_BACKOFF_SECONDS = 600
    for failures in range(1, 40):
        ceiling = min(600, 2 ** (failures - 1))
        for _ in range(20):
            assert ceiling / 2 <= sink_backoff_seconds(failures) <= ceiling <= 600


def test_retry_after_is_honoured(sink, settings):
    settings.AUDIT_DELIVERY_MAX_BACKOFF_SECONDS = 0
    events(2)
    sink.faults = ["429"]
    before = timezone.now()
    deliver_pending(time_budget_seconds=0.5)
    assert Delivery.objects.first().state == "pending"
    assert SinkStatus.objects.get(name="egs2").retry_at >= before + timedelta(seconds=1)


def test_a_refused_credential_raises_an_alarm_and_keeps_everything_pending(sink):
    events(2)
    sink.faults = ["401"]
    report = deliver_pending(time_budget_seconds=0.3)  # ends inside the sink's backoff
    assert report.alarms
    assert set(states().values()) == {"pending"}
    assert DeliveryAlarm.objects.filter(cleared_at__isnull=True).exists()
    SinkStatus.objects.update(retry_at=None)
    deliver_pending()
    assert set(states().values()) == {"delivered"}
    assert not DeliveryAlarm.objects.filter(cleared_at__isnull=True).exists()


def test_a_413_splits_the_batch(sink):
    events(6)
    sink.faults = ["413"]
    assert deliver_pending().delivered == 6
    assert len(sink.memories) == 6


def test_without_a_url_delivery_is_off_and_events_stay_pending(settings):
    settings.EGS2_MEMORY_API_URL = ""
    events(2)
    report = deliver_pending()
    assert report.skipped
    assert set(states().values()) == {"pending"}


def test_a_claimed_batch_is_not_claimed_twice():
    events(5)
    first = deliveries_claim(limit=3)
    second = deliveries_claim(limit=10)
    assert len(first) == 3 and len(second) == 2
    assert not {e.id for e in first} & {e.id for e in second}
