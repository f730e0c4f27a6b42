"""What /healthz reports: each part of the service, never a connection detail.

"unavailable" (503) when /mcp itself cannot answer (the database is down); "degraded" (200) when
only audit delivery is behind (broker, worker, backlog, the Memory API); "ok" otherwise.
"""

import logging

from django.conf import settings
from django.db import connection
from django.utils import timezone

from hyperbook.celery import app as celery_app

logger = logging.getLogger(__name__)


def database_is_reachable() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone() == (1,)
    except Exception as exc:  # any driver error means "not reachable"
        logger.warning("health: database unreachable (%s)", type(exc).__name__)
        return False


def broker_is_reachable(timeout_seconds: float = 2.0) -> bool:
    try:
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout_seconds)
            return True
    except Exception as exc:  # kombu raises transport-specific errors
        logger.warning("health: broker unreachable (%s)", type(exc).__name__)
        return False


def worker_stale_after_seconds() -> float:
    """A worker runs the delivery sweep every AUDIT_DELIVERY_SWEEP_SECONDS; missing several in a
    row means it (or beat) is down."""
    return max(60.0, 6.0 * settings.AUDIT_DELIVERY_SWEEP_SECONDS)


def health_report() -> tuple[int, dict]:
    database, broker = database_is_reachable(), broker_is_reachable()
    report: dict = {"checks": {"database": database, "broker": broker}}
    if not database:
        report["status"] = "unavailable"
        return 503, report
    problems = [] if broker else ["broker"]
    problems += _delivery_report(report)
    report["status"] = "degraded" if problems else "ok"
    if problems:
        report["degraded"] = problems
    return 200, report


def _delivery_report(report: dict) -> list[str]:
    from audit.models import SinkStatus
    from audit.selectors import audit_backlog

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
    enabled = bool(settings.EGS2_MEMORY_API_URL)
    delivery = {"enabled": enabled}
    if status is not None:
        delivery["last_error"] = status.last_error or None
        delivery["last_error_seconds_ago"] = _age(status.last_error_at, now)
        delivery["backing_off"] = bool(status.retry_at and status.retry_at > now)
    report["delivery"] = delivery
    if not enabled:
        return problems  # events wait for a URL by design: not a fault
    if oldest_age is not None and oldest_age > settings.AUDIT_BACKLOG_DEGRADED_SECONDS:
        problems.append("audit_backlog")
    if delivery.get("backing_off"):
        problems.append("delivery")
    return problems


def _age(moment, now) -> float | None:
    return None if moment is None else round(max((now - moment).total_seconds(), 0.0), 1)
