"""The audit log's state for /metrics, read from the database at each scrape (so every process
and host reports the same figures): the delivery backlog and its oldest event's age, deliveries
failing or rejected, open delivery alarms, and the last signed checkpoint's age."""

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from audit import selectors
from audit.models import Delivery, DeliveryAlarm


class AuditStateCollector:
    def collect(self):
        now = timezone.now()
        backlog, oldest = selectors.audit_backlog()
        yield _gauge("hyperbook_audit_backlog_events", "Audit events not yet delivered.", backlog)
        yield _gauge(
            "hyperbook_audit_oldest_undelivered_age_seconds",
            "Age of the oldest audit event not yet delivered (0 when none is waiting).",
            (now - oldest).total_seconds() if oldest else 0.0,
        )
        failing = Delivery.objects.filter(state=Delivery.State.PENDING, attempts__gt=0)
        yield _gauge(
            "hyperbook_audit_delivery_failing_events",
            "Undelivered events whose last delivery attempt failed (they are retried).",
            failing.exclude(last_error="").count(),
        )
        yield _gauge(
            "hyperbook_audit_delivery_rejected_events",
            "Events the Memory API rejected (kept, shown to auditors, not retried).",
            Delivery.objects.filter(state=Delivery.State.REJECTED).count(),
        )
        yield _gauge(
            "hyperbook_audit_delivery_alarms_open",
            "Open delivery alarms (e.g. the Memory API refusing our credentials).",
            DeliveryAlarm.objects.filter(cleared_at__isnull=True).count(),
        )
        checkpoint = selectors.latest_checkpoint()
        if checkpoint is not None:  # no series at all until the first checkpoint exists
            yield _gauge(
                "hyperbook_audit_last_checkpoint_age_seconds",
                "Age of the newest signed checkpoint of the audit log.",
                (now - checkpoint.created_at).total_seconds(),
            )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
