"""Delivering pending events to the egs2 Memory API: claim, send outside any transaction, record.

Safe to run in several workers at once and to repeat: a batch is claimed with one conditional
UPDATE and a lease; an event is marked delivered only on the receiver's word, and the receiver
de-duplicates by event id, so a crash between send and mark only means one more (harmless) send.
"""

import logging
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit import memory_api
from audit.models import AuditEvent, ChainHead, Delivery, DeliveryAlarm, DeliveryCursor

logger = logging.getLogger("hyperbook.audit")


@dataclass
class DeliveryReport:
    delivered: int = 0
    rejected: int = 0
    retried: int = 0
    alarms: list[str] = field(default_factory=list)
    skipped: str = ""


def deliveries_queue_new(*, limit: int = 1000, now=None) -> int:
    """Give the events appended since the last call their Delivery row, in sequence order.

    Appending an event writes only the event (the outbox entry); this queues it. The cursor row is
    locked, so workers running this at once queue each event exactly once."""
    now = now or timezone.now()
    queued = 0
    for source in ChainHead.objects.values_list("source", flat=True):
        with transaction.atomic():
            cursor, _ = DeliveryCursor.objects.select_for_update().get_or_create(source=source)
            new = list(
                AuditEvent.objects.filter(source=source, sequence__gt=cursor.queued_sequence)
                .order_by("sequence")
                .values_list("id", "sequence")[:limit]
            )
            if not new:
                continue
            Delivery.objects.bulk_create(
                [
                    Delivery(event_id=event_id, sequence=seq, next_attempt_at=now)
                    for event_id, seq in new
                ]
            )
            cursor.queued_sequence = new[-1][1]
            cursor.save(update_fields=["queued_sequence"])
            queued += len(new)
    return queued


def deliveries_claim(*, limit: int, now=None) -> list[AuditEvent]:
    """Claim up to `limit` due events (new ones are queued first) for this worker, with a lease."""
    now = now or timezone.now()
    deliveries_queue_new(now=now)
    due = (
        Q(state=Delivery.State.PENDING)
        & Q(next_attempt_at__lte=now)
        & (Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
    )
    candidates = list(
        Delivery.objects.filter(due).order_by("sequence").values_list("event_id", flat=True)[:limit]
    )
    if not candidates:
        return []
    claim_id = uuid.uuid4()
    # The same conditions again: a row another worker claimed meanwhile is left alone.
    Delivery.objects.filter(due, event_id__in=candidates).update(
        claim_id=claim_id,
        claimed_until=now + timedelta(seconds=settings.AUDIT_DELIVERY_LEASE_SECONDS),
    )
    return list(AuditEvent.objects.filter(delivery__claim_id=claim_id).order_by("sequence"))


def deliver_pending(*, time_budget_seconds: float = 60.0) -> DeliveryReport:
    report = DeliveryReport()
    deliveries_queue_new()  # even when delivery is off: the backlog is visible as pending rows
    base_url, token = settings.EGS2_MEMORY_API_URL, settings.EGS2_MEMORY_API_TOKEN
    if not base_url:
        report.skipped = "EGS2_MEMORY_API_URL is not set; events stay pending"
        return report
    if not token:
        _raise_alarm("credential", "EGS2_MEMORY_API_TOKEN is not set; events stay pending")
        report.skipped = "no credential"
        return report
    try:
        memory_api.checked_base_url(base_url)
    except memory_api.MemoryApiConfigError as exc:
        _raise_alarm("configuration", str(exc))
        report.skipped = str(exc)
        return report
    deadline = time.monotonic() + time_budget_seconds
    with httpx.Client(
        timeout=settings.EGS2_MEMORY_API_TIMEOUT_SECONDS, follow_redirects=False
    ) as client:
        while time.monotonic() < deadline:
            events = deliveries_claim(limit=settings.EGS2_MEMORY_API_BATCH_SIZE)
            if not events:
                break
            if not _send(events, client=client, base_url=base_url, token=token, report=report):
                break  # the receiver is unwell: stop for now; the sweep comes back later
    return report


def _send(events, *, client, base_url, token, report: DeliveryReport) -> bool:
    result = memory_api.post_batch(
        events,
        base_url=base_url,
        token=token,
        timeout=settings.EGS2_MEMORY_API_TIMEOUT_SECONDS,
        client=client,
    )
    if result.split:
        middle = len(events) // 2
        return _send(
            events[:middle], client=client, base_url=base_url, token=token, report=report
        ) and _send(events[middle:], client=client, base_url=base_url, token=token, report=report)
    now = timezone.now()
    if result.delivered:
        Delivery.objects.filter(event_id__in=result.delivered).update(
            state=Delivery.State.DELIVERED,
            delivered_at=now,
            claim_id=None,
            claimed_until=None,
            last_error="",
        )
        report.delivered += len(result.delivered)
        _clear_alarms()
    for event_id, reason in result.rejected.items():
        Delivery.objects.filter(event_id=event_id).update(
            state=Delivery.State.REJECTED,
            last_error=reason[:300],
            claim_id=None,
            claimed_until=None,
        )
        report.rejected += 1
    if result.alarm:
        _raise_alarm("credential", result.alarm)
        report.alarms.append(result.alarm)
    if result.retry:
        _schedule_retry(result.retry, result.retry_after, result.alarm or result.error, now)
        report.retried += len(result.retry)
        logger.warning(
            "audit delivery: %s event(s) to retry (%s)",
            len(result.retry),
            result.alarm or result.error,
        )
        return False
    return True


def _schedule_retry(event_ids, retry_after, error: str, now) -> None:
    for delivery in Delivery.objects.filter(event_id__in=event_ids):
        attempts = delivery.attempts + 1
        backoff = min(settings.AUDIT_DELIVERY_MAX_BACKOFF_SECONDS, 2 ** min(attempts, 10))
        delay = backoff * random.uniform(0.5, 1.5)  # jitter: workers do not retry in lockstep
        if retry_after is not None:
            delay = max(delay, retry_after)
        Delivery.objects.filter(pk=delivery.pk).update(
            attempts=attempts,
            next_attempt_at=now + timedelta(seconds=delay),
            last_error=error[:300],
            claim_id=None,
            claimed_until=None,
        )


def _raise_alarm(kind: str, message: str) -> None:
    logger.error("audit delivery alarm: %s", message)
    if not DeliveryAlarm.objects.filter(
        kind=kind, message=message, cleared_at__isnull=True
    ).exists():
        DeliveryAlarm.objects.create(kind=kind, message=message[:300])


def _clear_alarms() -> None:
    DeliveryAlarm.objects.filter(cleared_at__isnull=True).update(cleared_at=timezone.now())
