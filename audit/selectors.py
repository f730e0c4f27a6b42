"""Reads for auditors: filtered event lists that stay fast on millions of rows."""

from datetime import timedelta

from django.db.models import Q
from django.utils import timezone

from audit.models import AuditEvent, ChainVerification, Delivery, DeliveryAlarm

TIME_RANGES = {
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


def audit_events_visible():
    return AuditEvent.objects.select_related("delivery")


def event_delivery(event: AuditEvent) -> Delivery:
    """The event's delivery state; an event the worker has not queued yet is pending, untried."""
    delivery = getattr(event, "delivery", None)
    return (
        delivery if delivery is not None else Delivery(event_id=event.pk, sequence=event.sequence)
    )


def with_delivery_state(queryset, state: str):
    if state == Delivery.State.PENDING:
        # Not queued by the worker yet (no delivery row) counts as pending too.
        return queryset.filter(Q(delivery__state=state) | Q(delivery__isnull=True))
    return queryset.filter(delivery__state=state)


def chain_status() -> ChainVerification | None:
    return ChainVerification.objects.order_by("-checked_at").first()


def open_alarms():
    return DeliveryAlarm.objects.filter(cleared_at__isnull=True)


def since(range_key: str):
    delta = TIME_RANGES.get(range_key)
    return timezone.now() - delta if delta else None


def audit_backlog() -> tuple[int, object]:
    """(undelivered events, when the oldest of them happened): events not queued for delivery
    yet plus queued ones still pending. Reads a few rows and one partial index, never the table."""
    from audit.models import ChainHead, DeliveryCursor

    queued_to = dict(DeliveryCursor.objects.values_list("source", "queued_sequence"))
    pending = Delivery.objects.filter(state=Delivery.State.PENDING)
    count = pending.count()
    oldest = pending.order_by("sequence").values_list("event__occurred_at", flat=True).first()
    for source, last in ChainHead.objects.values_list("source", "last_sequence"):
        unqueued = last - queued_to.get(source, 0)
        if unqueued <= 0:
            continue
        count += unqueued
        first = (
            AuditEvent.objects.filter(source=source, sequence=queued_to.get(source, 0) + 1)
            .values_list("occurred_at", flat=True)
            .first()
        )
        if first is not None and (oldest is None or first < oldest):
            oldest = first
    return count, oldest
