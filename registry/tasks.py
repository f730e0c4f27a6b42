"""The registry's periodic work (Celery beat): thin, the rules are in the services."""

from celery import shared_task

from registry.console import console_history_expire


@shared_task(name="registry.console_history_expire", ignore_result=True, time_limit=300)
def expire_console_history() -> int:
    """Delete the console turns past CONSOLE_HISTORY_RETENTION_DAYS (settings)."""
    return console_history_expire()
