"""ASGI entry point: /mcp (the embedded MCP server) beside Django (admin, API, health check)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "hyperbook.settings.local")
django_application = get_asgi_application()

from mcpserver.routing import Router  # noqa: E402  (needs Django set up first)
from mcpserver.server import McpApplication  # noqa: E402

application = Router(django_application, McpApplication())
