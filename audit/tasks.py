"""Celery tasks for audit delivery and checkpoints: thin wrappers around their services."""

import time

from celery import shared_task
from django.conf import settings

from audit.checkpoints import checkpoint_create_if_due
from audit.delivery import deliver_pending, delivery_enabled
from audit.nudges import nudger
from audit.services import SOURCE
from audit.verification import JOB_LOST_AFTER_SECONDS, verification_run
from audit.witnesses import witness_latest

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
    """Ask a worker to deliver soon, off the caller's path (audit.nudges). At most one message a
    second per process: the task drains everything pending, and the periodic sweep covers a
    message that is lost."""
    global _last_request
    if not delivery_enabled():
        return  # delivery is off: events stay pending until the URL is set and the sweep runs
    now = time.monotonic()
    if now - _last_request < 1.0:
        return
    _last_request = now
    nudger.nudge("delivery", _publish(deliver_pending_events))


@shared_task(
    name="audit.checkpoint",
    ignore_result=True,
    soft_time_limit=30,
    time_limit=60,
)
def create_checkpoint() -> int | None:
    """Sign the tree's root when a checkpoint is due; have it delivered and witnessed at once.
    The periodic run also asks the witnesses again, after one failed or was slow."""
    checkpoint = checkpoint_create_if_due()
    if settings.AUDIT_WITNESSES:
        witness_latest_checkpoint.delay()
    if checkpoint is None:
        return None
    if delivery_enabled():
        deliver_pending_events.delay()
    return checkpoint.number


@shared_task(
    name="audit.witness",
    ignore_result=True,
    soft_time_limit=120,
    time_limit=150,
)
def witness_latest_checkpoint() -> dict:
    """Have the witnesses cosign the latest checkpoint (each a bounded request)."""
    return witness_latest(SOURCE)


_checkpoint_requested_at_sequence = 0


def request_checkpoint_after(last_sequence: int) -> None:
    """Events up to `last_sequence` are committed: when this process has seen another
    AUDIT_CHECKPOINT_EVERY of them, ask a worker for a checkpoint (the worker decides whether
    one is due; the periodic run covers the time limit and a lost message)."""
    global _checkpoint_requested_at_sequence
    if last_sequence - _checkpoint_requested_at_sequence < settings.AUDIT_CHECKPOINT_EVERY:
        return
    _checkpoint_requested_at_sequence = last_sequence
    nudger.nudge("checkpoint", _publish(create_checkpoint))


def after_append(last_sequence: int) -> None:
    """After an append commits (audit.services): ask a worker to deliver, and to sign a
    checkpoint when enough events have been appended since (the worker's timer covers the rest)."""
    request_delivery()
    request_checkpoint_after(last_sequence)


def _publish(task):
    """One message for the task, without kombu's retries: they held the caller for 0.6 s while
    the broker was down, and the sweep and the checkpoint timer already stand in for a lost one."""
    return lambda: task.apply_async(retry=False)


@shared_task(
    name="audit.verify_chain",
    ignore_result=True,
    soft_time_limit=JOB_LOST_AFTER_SECONDS - 60,
    time_limit=JOB_LOST_AFTER_SECONDS,
)
def verify_chain_job(verification_id: int | None = None) -> bool | None:
    """An auditor's chain check, run here rather than in a web worker (it reads every event);
    without an id (the periodic sweep), the oldest one still queued."""
    job = verification_run(verification_id=verification_id)
    return job.ok if job else None
