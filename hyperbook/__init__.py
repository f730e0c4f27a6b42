"""The hyperbook project: wiring only (settings, URLs, ASGI/WSGI, the Celery app)."""

from .celery import app as celery_app

__all__ = ["celery_app"]
