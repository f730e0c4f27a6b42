"""What /healthz reports: each part of the service, never a connection detail.

"unavailable" (503) when /mcp itself cannot answer (the database is down); "degraded" (200) when
only audit delivery is behind (broker, worker, backlog, the Memory API); "ok" otherwise.
"""

import logging

from celery import current_app as celery_app
from django.conf import settings
from django.db import connection
from django.utils.module_loading import import_string

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


def health_report() -> tuple[int, dict]:
    database, broker = database_is_reachable(), broker_is_reachable()
    report: dict = {"checks": {"database": database, "broker": broker}}
    if not database:
        report["status"] = "unavailable"
        return 503, report
    problems = [] if broker else ["broker"]
    for path in settings.HEALTH_CHECKS:  # each app's part: adds its section, returns problems
        problems += import_string(path)(report)
    report["status"] = "degraded" if problems else "ok"
    if problems:
        report["degraded"] = problems
    return 200, report
