"""WSGI entry point (the admin and API only; /mcp is served by the ASGI application)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hyperbook.settings.local")
application = get_wsgi_application()
