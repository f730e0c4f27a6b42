"""Reachability checks for /healthz; they answer yes or no and never expose connection details."""

import logging

from django.db import connection

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
