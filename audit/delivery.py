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

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from audit import memory_api
from audit.models import (
    AuditCheckpoint,
    AuditEvent,
    ChainHead,
    CheckpointDelivery,
    Delivery,
    DeliveryAlarm,
    DeliveryCursor,
    SinkStatus,
)
from core.outbound import outbound_client

logger = logging.getLogger("hyperbook.audit")

SINK = "egs2"  # the one sink today: the egs2 Memory API
# However long a sink asks us to wait (Retry-After), we look again after this long at the latest.
MAX_RETRY_AFTER_SECONDS = 3600


@dataclass
class DeliveryReport:
    delivered: int = 0
    rejected: int = 0
    retried: int = 0
    checkpoints_delivered: int = 0
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


def delivery_enabled() -> bool:
    """Whether events leave this server at all: a sink is configured. When none is, events are
    kept (and listed as delivery off), never lost."""
    return bool(settings.EGS2_MEMORY_API_URL)


def deliver_pending(*, time_budget_seconds: float = 60.0) -> DeliveryReport:
    """Post due events until none are left, the sink asks to wait past the time budget, or the
    budget is spent. A failed batch makes the sink back off; a short backoff is waited out here,
    so a flaky sink is retried within the same run."""
    report = DeliveryReport()
    sink_heartbeat()
    deliveries_queue_new()  # even when delivery is off: the backlog is visible as pending rows
    base_url, token = settings.EGS2_MEMORY_API_URL, settings.EGS2_MEMORY_API_TOKEN
    if not delivery_enabled():
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
    with outbound_client(timeout=settings.EGS2_MEMORY_API_TIMEOUT_SECONDS) as client:
        while time.monotonic() < deadline:
            wait = sink_wait_seconds()
            if wait > 0:
                if time.monotonic() + wait >= deadline:
                    report.skipped = "the Memory API is backing off"
                    break
                time.sleep(wait)
            events = deliveries_claim(limit=settings.EGS2_MEMORY_API_BATCH_SIZE)
            if not events:
                break
            if _send(events, client=client, base_url=base_url, token=token, report=report):
                sink_answered()
        if not report.skipped and sink_wait_seconds() == 0:
            _send_checkpoints(client=client, base_url=base_url, token=token, report=report)
    return report


def _send_checkpoints(*, client, base_url, token, report: DeliveryReport) -> None:
    """Post the signed checkpoints not delivered yet (few: one a minute or so), oldest first.
    Posting one twice is harmless: its id is fixed, the receiver keeps the first copy."""
    pending = list(
        AuditCheckpoint.objects.filter(delivery__state=Delivery.State.PENDING).order_by(
            "source", "number"
        )[: settings.EGS2_MEMORY_API_BATCH_SIZE]
    )
    if not pending:
        return
    result = memory_api.post_memories(
        [memory_api.memory_for_checkpoint(checkpoint) for checkpoint in pending],
        base_url=base_url,
        token=token,
        timeout=settings.EGS2_MEMORY_API_TIMEOUT_SECONDS,
        client=client,
    )
    now = timezone.now()
    mine = CheckpointDelivery.objects.filter
    differing, unread = _copies_not_ours(
        [c for c in pending if str(c.id) in result.duplicates],
        client=client,
        base_url=base_url,
        token=token,
    )
    for checkpoint in differing:
        # A re-signed or forged checkpoint under our id: the anchor outside our database no
        # longer vouches for ours. Never "delivered"; an operator must look.
        message = (
            f"checkpoint {checkpoint.number} ({checkpoint.source}, #{checkpoint.sequence}): "
            "the Memory API holds a different copy under its id"
        )
        mine(checkpoint_id=checkpoint.id).update(
            state=Delivery.State.REJECTED, last_error=message[:300]
        )
        _raise_alarm(DeliveryAlarm.CHECKPOINT_CONFLICT, message)
    for checkpoint, error in unread.items():
        mine(checkpoint_id=checkpoint.id).update(
            attempts=F("attempts") + 1, last_error=f"duplicate not compared: {error}"[:300]
        )
    held_elsewhere = {str(c.id) for c in (*differing, *unread)}
    delivered = [i for i in result.delivered if i not in held_elsewhere]
    if delivered:
        mine(checkpoint_id__in=delivered).update(
            state=Delivery.State.DELIVERED, delivered_at=now, last_error=""
        )
        report.checkpoints_delivered += len(delivered)
    for checkpoint_id, reason in result.rejected.items():
        logger.error("audit delivery: the Memory API rejected checkpoint %s", checkpoint_id)
        mine(checkpoint_id=checkpoint_id).update(
            state=Delivery.State.REJECTED, last_error=reason[:300]
        )
    if result.retry:
        error = (result.alarm or result.error or "split")[:300]
        mine(checkpoint_id__in=result.retry).update(attempts=F("attempts") + 1, last_error=error)
        if result.alarm:
            _raise_alarm("credential", result.alarm)
        sink_failed(error=error, retry_after=result.retry_after, now=now)
    elif result.delivered:
        sink_answered()


def _copies_not_ours(checkpoints, *, client, base_url, token):
    """Of checkpoints the Memory API answered "duplicate" for: those whose copy there is not ours
    (or that it then says it does not hold), and those it could not be asked about (by error)."""
    differing, unread = [], {}
    for checkpoint in checkpoints:
        try:
            stored = memory_api.read_memory(
                str(checkpoint.id), base_url=base_url, token=token, client=client
            )
        except memory_api.MemoryApiReadError as exc:
            unread[checkpoint] = str(exc)
            continue
        if not memory_api.holds_the_same(memory_api.memory_for_checkpoint(checkpoint), stored):
            differing.append(checkpoint)
    return differing, unread


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
    # The ids are the events' UUIDs as text. The django-stubs plugin types a foreign key's lookups
    # by its target key's Python type alone (UUID), though the key's own lookups take text too, as
    # Django does (UUIDField.to_python): hence the three `type: ignore[misc]` below.
    if result.delivered:
        Delivery.objects.filter(event_id__in=result.delivered).update(  # type: ignore[misc]
            state=Delivery.State.DELIVERED,
            delivered_at=now,
            claim_id=None,
            claimed_until=None,
            last_error="",
        )
        report.delivered += len(result.delivered)
        _clear_alarms()
    for event_id, reason in result.rejected.items():
        Delivery.objects.filter(event_id=event_id).update(  # type: ignore[misc]
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
        error = (result.alarm or result.error)[:300]
        # The events are due again at once: when they go is the sink's backoff's to say.
        Delivery.objects.filter(event_id__in=result.retry).update(  # type: ignore[misc]
            attempts=F("attempts") + 1,
            next_attempt_at=now,
            last_error=error,
            claim_id=None,
            claimed_until=None,
        )
        sink_failed(error=error, retry_after=result.retry_after, now=now)
        report.retried += len(result.retry)
        logger.warning("audit delivery: %s event(s) to retry (%s)", len(result.retry), error)
        return False
    return True


def sink_backoff_seconds(failures: int) -> float:
    """How long the sink rests after `failures` failures in a row: exponential from 1 s, with
    jitter below it (workers do not retry in lockstep), never above the configured maximum."""
    ceiling = min(settings.AUDIT_DELIVERY_MAX_BACKOFF_SECONDS, 2 ** min(max(failures - 1, 0), 20))
    return random.uniform(ceiling / 2, ceiling)


def _sink_row() -> SinkStatus:
    status, _ = SinkStatus.objects.get_or_create(name=SINK)
    return status


def sink_heartbeat(now=None) -> None:
    """A delivery worker is alive (the periodic sweep runs this every few seconds)."""
    now = now or timezone.now()
    if not SinkStatus.objects.filter(name=SINK).update(worker_seen_at=now):
        SinkStatus.objects.get_or_create(name=SINK, defaults={"worker_seen_at": now})


def sink_wait_seconds(now=None) -> float:
    now = now or timezone.now()
    retry_at = SinkStatus.objects.filter(name=SINK).values_list("retry_at", flat=True).first()
    return max((retry_at - now).total_seconds(), 0.0) if retry_at else 0.0


def sink_failed(*, error: str, retry_after: float | None, now) -> None:
    _sink_row()
    SinkStatus.objects.filter(name=SINK).update(failures=F("failures") + 1)
    failures = SinkStatus.objects.filter(name=SINK).values_list("failures", flat=True).get()
    delay = sink_backoff_seconds(failures)
    if retry_after is not None:
        delay = max(delay, min(retry_after, MAX_RETRY_AFTER_SECONDS))
    SinkStatus.objects.filter(name=SINK).update(
        retry_at=now + timedelta(seconds=delay), last_error=error, last_error_at=now
    )


def sink_answered(now=None) -> None:
    """The sink took a batch: no more backoff, the backlog drains at full speed."""
    now = now or timezone.now()
    SinkStatus.objects.filter(name=SINK).update(failures=0, retry_at=None, last_success_at=now)


def _raise_alarm(kind: str, message: str) -> None:
    logger.error("audit delivery alarm: %s", message)
    if not DeliveryAlarm.objects.filter(
        kind=kind, message=message, cleared_at__isnull=True
    ).exists():
        DeliveryAlarm.objects.create(kind=kind, message=message[:300])


def _clear_alarms() -> None:
    """A delivery that went through clears the alarms it disproves (a refused credential, a bad
    configuration), never a checkpoint conflict (an operator must look into that one) nor a
    witness's alarm (its next cosignature clears it)."""
    DeliveryAlarm.objects.filter(cleared_at__isnull=True).exclude(
        kind=DeliveryAlarm.CHECKPOINT_CONFLICT
    ).exclude(kind__startswith="witness:").update(cleared_at=timezone.now())
