"""Celery tasks for audit delivery: thin wrappers that call audit.delivery."""

import logging
import time

from celery import shared_task
from django.conf import settings

from audit.delivery import deliver_pending

logger = logging.getLogger("hyperbook.audit")

_last_request = 0.0


@shared_task(
    name="audit.deliver_pending",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    soft_time_limit=90,
    time_limit=120,
)
def deliver_pending_events() -> dict:
    report = deliver_pending(time_budget_seconds=60)
    return {"delivered": report.delivered, "rejected": report.rejected, "retried": report.retried}


def request_delivery() -> None:
    """Ask a worker to deliver soon. At most one message a second per process: the task drains
    everything pending, and the periodic sweep covers a message that is lost."""
    global _last_request
    if not settings.EGS2_MEMORY_API_URL:
        return  # delivery is off: events stay pending until the URL is set and the sweep runs
    now = time.monotonic()
    if now - _last_request < 1.0:
        return
    _last_request = now
    try:
        deliver_pending_events.delay()
    except Exception as exc:  # the broker being down must not fail the audited request
        logger.warning("audit: could not queue delivery (%s); the sweep will", type(exc).__name__)
