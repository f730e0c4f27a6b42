"""The audit log's part of /healthz: the delivery worker, the backlog and the Memory API."""

from django.conf import settings
from django.utils import timezone

from audit.delivery import delivery_enabled
from audit.models import DeliveryAlarm, SinkStatus
from audit.selectors import audit_backlog


def worker_stale_after_seconds() -> float:
    """A worker runs the delivery sweep every AUDIT_DELIVERY_SWEEP_SECONDS; missing several in a
    row means it (or beat) is down."""
    return max(60.0, 6.0 * settings.AUDIT_DELIVERY_SWEEP_SECONDS)


def delivery_report(report: dict) -> list[str]:
    now = timezone.now()
    problems = []
    status = SinkStatus.objects.filter(name="egs2").first()
    seen = _age(status.worker_seen_at, now) if status else None
    alive = seen is not None and seen <= worker_stale_after_seconds()
    report["worker"] = {"alive": alive, "seen_seconds_ago": seen}
    if not alive:
        problems.append("worker")
    count, oldest = audit_backlog()
    oldest_age = _age(oldest, now)
    report["audit_backlog"] = {"pending": count, "oldest_seconds": oldest_age}
    enabled = delivery_enabled()
    delivery: dict[str, object] = {"enabled": enabled}
    if status is not None:
        delivery["last_error"] = status.last_error or None
        delivery["last_error_seconds_ago"] = _age(status.last_error_at, now)
        delivery["backing_off"] = bool(status.retry_at and status.retry_at > now)
    conflicts = DeliveryAlarm.objects.filter(
        kind=DeliveryAlarm.CHECKPOINT_CONFLICT, cleared_at__isnull=True
    ).count()
    delivery["checkpoint_conflicts"] = conflicts
    report["delivery"] = delivery
    if conflicts:
        problems.append("checkpoint_conflict")
    if not enabled:
        return problems  # events wait for a URL by design: not a fault
    if oldest_age is not None and oldest_age > settings.AUDIT_BACKLOG_DEGRADED_SECONDS:
        problems.append("audit_backlog")
    if delivery.get("backing_off"):
        problems.append("delivery")
    return problems


def _age(moment, now) -> float | None:
    return None if moment is None else round(max((now - moment).total_seconds(), 0.0), 1)
