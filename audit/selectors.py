"""Reads for auditors: filtered event lists that stay fast on millions of rows."""

from datetime import timedelta

from django.utils import timezone

from audit.models import AuditEvent, ChainVerification, DeliveryAlarm

TIME_RANGES = {
    "1h": timedelta(hours=1),
    "24h": timedelta(days=1),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}


def audit_events_visible():
    return AuditEvent.objects.select_related("delivery")


def chain_status() -> ChainVerification | None:
    return ChainVerification.objects.order_by("-checked_at").first()


def open_alarms():
    return DeliveryAlarm.objects.filter(cleared_at__isnull=True)


def since(range_key: str):
    delta = TIME_RANGES.get(range_key)
    return timezone.now() - delta if delta else None
