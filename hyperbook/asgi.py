"""ASGI entry point: Django for the admin, API and health check."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hyperbook.settings.local")
application = get_asgi_application()
