"""Delivery rules against a real HTTP stand-in for the Memory API on loopback."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from audit.delivery import deliver_pending, deliveries_claim, deliveries_queue_new
from audit.models import AuditEvent, Delivery, DeliveryAlarm, DeliveryCursor
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


def make_due() -> None:
    Delivery.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))


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


@pytest.mark.parametrize("fault", ["500", "down", "garbage", "slow"])
def test_transient_failures_keep_events_pending_for_a_later_retry(sink, fault):
    events(3)
    sink.faults = [fault]
    report = deliver_pending()
    assert report.delivered == 0 and report.retried == 3
    assert set(states().values()) == {"pending"}
    delivery = Delivery.objects.first()
    assert delivery.attempts == 1
    assert delivery.next_attempt_at > timezone.now() - timedelta(seconds=1)
    assert deliveries_claim(limit=10) == []  # backing off: not due yet
    make_due()
    assert deliver_pending().delivered == 3


def test_retry_after_is_honoured(sink, settings):
    settings.AUDIT_DELIVERY_MAX_BACKOFF_SECONDS = 0
    events(2)
    sink.faults = ["429"]
    before = timezone.now()
    deliver_pending()
    delivery = Delivery.objects.first()
    assert delivery.state == "pending"
    assert delivery.next_attempt_at >= before + timedelta(seconds=1)


def test_a_refused_credential_raises_an_alarm_and_keeps_everything_pending(sink):
    events(2)
    sink.faults = ["401"]
    report = deliver_pending()
    assert report.alarms
    assert set(states().values()) == {"pending"}
    assert DeliveryAlarm.objects.filter(cleared_at__isnull=True).exists()
    make_due()
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
